"""Checks each schedule's activation memory per pipeline stage.

    check_pipeline_memory.py TESSERA MODEL_A MODEL_B

MODEL_B has twice MODEL_A's batch; both are compiled for two pipeline
stages with microbatches of the same size (4 and 8 of them), under GPipe
and 1F1B. GPipe keeps every microbatch's activations until its backward,
so its activation peak grows with the microbatches; 1F1B keeps at most
as many as there are stages, so its peak stays put. 2BW holds a
microbatch as 1F1B does and what a stage sends until the run's end, a
copy per microbatch: its peak grows by the stage boundary's values alone.
"""

import re
import subprocess
import sys


def peaks(tessera, model, microbatches, schedule):
    out = subprocess.run(
        [tessera, "compile", model, "--mesh", "dp=1,tp=1", "--pp", "2",
         "--microbatches", str(microbatches), "--schedule", schedule,
         "--train", "adamw", "-o", "-", "--text"],
        capture_output=True, text=True, check=True).stdout
    return [int(bytes) for bytes in re.findall(
        r"category_peaks \{[^}]*activation_bytes: (\d+)", out)]


def main():
    tessera, small, large = sys.argv[1:4]
    for schedule, low, high in (("gpipe", 1.4, 3.0), ("1f1b", 0.95, 1.05),
                                ("2bw", 0.95, 1.2)):
        few, many = peaks(tessera, small, 4, schedule), \
            peaks(tessera, large, 8, schedule)
        for stage, (a, b) in enumerate(zip(few, many)):
            ratio = b / a
            print(f"{schedule} stage {stage}: activations {a} bytes with 4 "
                  f"microbatches, {b} with 8 ({ratio:.2f}x)")
            if not low <= ratio <= high:
                sys.exit(f"{schedule} stage {stage}: expected {low}x to "
                         f"{high}x, got {ratio:.2f}x")
        if len(few) != 2 or len(many) != 2:
            sys.exit(f"{schedule}: expected two stages")


if __name__ == "__main__":
    main()
