#!/usr/bin/env python3
"""Tessera's adversarial suite (issue 28): bad inputs of one class, made
from valid ones by seeded mutations, each run with a time limit.

Every case must end in one of two ways: success, or a clean failure (a
non-zero exit with a short message). Anything else is a
finding: a crash (a signal, a sanitizer or LLVM report, an uncaught C++
exception), a hang (the time limit), a module dump or a wall of text on
stderr, or, for the classes that can tell, a wrong result (a changed
checkpoint or input file that loads without an error).

Classes:
  plan        binary plans with flipped bits, truncated or grown, and text
              plans (their checksum removed) with numbers and enums edited:
              `tessera-run --check-plan`, and one step of those that pass on
              one rank.
  ir          model files with numbers, types, ops and lines edited:
              `tessera compile` on dp=2 x tp=2 with a train step.
  cli         every subcommand with out-of-range, meaningless and
              conflicting options.
  files       tensor files (`--inputs`) and checkpoints with flipped,
              truncated and edited bytes and index lines: a change to any
              byte of a checkpoint must be refused, never loaded.

Usage: adversarial.py CLASS --bin DIR --examples DIR --work DIR
       [--seed N] [--cases N]
Prints one line per finding and a summary; exits 1 on any finding. The
inputs of findings stay in the work directory.
"""

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys

CRASH_MARKS = ("Sanitizer", "terminate called", "Stack dump", "LLVM ERROR",
               "Segmentation fault", "Aborted", "core dumped",
               "PLEASE submit a bug report", "UNREACHABLE", "Assertion")
# A clean failure says what is wrong in a few lines; Open MPI's abort banner
# (tessera-run's runtime errors end in MPI_ABORT) adds nine.
MAX_ERROR_LINES = 16
LIMIT_SECONDS = 60


class Suite:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.cases = 0
        self.accepted = 0
        self.refused = 0
        self.findings = []
        os.makedirs(args.work, exist_ok=True)
        # Open MPI's session directories of their own: jobs of tests
        # running in parallel share /tmp/ompi.<host>.<uid> otherwise, and
        # one job's cleanup can remove it while another starts
        # (open-mpi/ompi#8510).
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                        OMPI_MCA_rmaps_base_oversubscribe="1",
                        OMPI_MCA_orte_tmpdir_base=os.path.join(
                            os.path.abspath(args.work), "ompi"))

    def tool(self, name):
        return os.path.join(self.args.bin, name)

    def example(self, name):
        return os.path.join(self.args.examples, name)

    def path(self, name):
        return os.path.join(self.args.work, name)

    def setup(self, command):
        """A command that makes a valid input: it must succeed."""
        subprocess.run(command, check=True, capture_output=True, env=self.env)

    def compile(self, example, plan, *flags):
        """The plan of an example, trained with AdamW."""
        self.setup([self.tool("tessera"), "compile", self.example(example),
                    "--train", "adamw", *flags, "-o", plan])

    def run(self, what, command, keep=(), must_fail=False):
        """Runs one case; records a finding unless it ends cleanly. `keep`
        names the files that reproduce it, copied aside on a finding.
        Returns the completed process (None on a hang)."""
        self.cases += 1
        case = f"{self.args.suite}-{self.cases}"
        # A session of its own, killed whole on a hang: mpirun's ranks
        # outlive a killed tessera and would load the machine for every
        # later case (and run).
        process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True,
                                   errors="replace", env=self.env,
                                   start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=LIMIT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            self.finding(case, what, "hang", command, keep, "")
            return None
        done = subprocess.CompletedProcess(command, process.returncode, stdout,
                                           stderr)
        err = done.stderr
        problem = None
        if done.returncode < 0 or done.returncode > 128:
            problem = f"killed by a signal (exit {done.returncode})"
        elif any(mark in err for mark in CRASH_MARKS):
            problem = "crash report on stderr"
        elif done.returncode != 0 and not (err + done.stdout).strip():
            problem = "failed without saying why"
        elif done.returncode != 0 and len(err.splitlines()) > MAX_ERROR_LINES:
            problem = f"{len(err.splitlines())} lines of diagnostics"
        elif must_fail and done.returncode == 0:
            problem = "accepted a damaged input (a wrong result)"
        if problem:
            self.finding(case, what, problem, command, keep, err)
        elif done.returncode == 0:
            self.accepted += 1
        else:
            self.refused += 1
        return done

    def finding(self, case, what, problem, command, keep, err):
        kept = []
        for path in keep:
            if os.path.exists(path):
                copy = self.path(f"finding-{case}-{os.path.basename(path)}")
                if os.path.isdir(path):
                    shutil.copytree(path, copy, dirs_exist_ok=True)
                else:
                    shutil.copy(path, copy)
                kept.append(copy)
        tail = err.strip().splitlines()[-3:] if err else []
        self.findings.append(case)
        print(f"FINDING {case}: {what}: {problem}\n  command: "
              f"{' '.join(command)}\n  kept: {' '.join(kept)}\n  stderr: "
              + " | ".join(tail), flush=True)

    # Mutations of bytes and text.
    def flip_bits(self, data):
        data = bytearray(data)
        for _ in range(self.rng.randint(1, 8)):
            i = self.rng.randrange(len(data))
            data[i] ^= 1 << self.rng.randrange(8)
        return bytes(data)

    def mutate_bytes(self, data):
        choice = self.rng.randrange(4)
        if choice == 0:
            return self.flip_bits(data), "flipped bits"
        if choice == 1:
            return data[:self.rng.randrange(len(data))], "truncated"
        i = self.rng.randrange(len(data))
        if choice == 2:
            junk = bytes(self.rng.randrange(256)
                         for _ in range(self.rng.randint(1, 16)))
            return data[:i] + junk + data[i:], "bytes inserted"
        return data[:i] + data[i + self.rng.randint(1, 16):], "bytes removed"

    NUMBERS = ["0", "-1", "1", "2", "3", "7", "-2147483648", "2147483647",
               "4294967296", "9223372036854775807", "-9223372036854775808",
               "18446744073709551615", "1099511627776", "65536"]

    def mutate_text(self, text, numbers=True, words=()):
        """One edit of `text`: a number replaced by an extreme or small one,
        a word by another of `words`, a line deleted or duplicated."""
        lines = text.splitlines(keepends=True)
        for _ in range(20):
            choice = self.rng.randrange(4)
            i = self.rng.randrange(len(lines))
            line = lines[i]
            if choice == 0 and numbers:
                spots = list(re.finditer(r"(?<![\w.])-?\d+", line))
                if not spots:
                    continue
                spot = self.rng.choice(spots)
                new = self.rng.choice(self.NUMBERS)
                lines[i] = line[:spot.start()] + new + line[spot.end():]
                return "".join(lines), f"line {i + 1}: a number to {new}"
            if choice == 1 and words:
                present = [w for w in words if w in line]
                if not present:
                    continue
                old = self.rng.choice(present)
                new = self.rng.choice(words)
                lines[i] = line.replace(old, new, 1)
                return "".join(lines), f"line {i + 1}: {old} to {new}"
            if choice == 2:
                del lines[i]
                return "".join(lines), f"line {i + 1} deleted"
            if choice == 3:
                lines.insert(i, line)
                return "".join(lines), f"line {i + 1} duplicated"
        return text + "\n", "a newline added"


def suite_plan(s):
    one = s.path("one.plan")
    four = s.path("four.plan")
    text = s.path("four.txtplan")
    s.compile("mlp.mlir", one)
    s.compile("mlp_megatron.mlir", four, "--mesh", "dp=2,tp=2", "--zero", "3",
              "--overlap")
    s.compile("mlp_megatron.mlir", text, "--mesh", "dp=2,tp=2", "--text")
    binaries = {p: open(p, "rb").read() for p in (one, four)}
    # Without its checksum a text plan loads unchecked: its fields reach the
    # structural checks.
    source = re.sub(r"(?m)^checksum:.*\n?", "", open(text).read())
    enums = ["F32", "BF16", "F16", "I32", "I64", "I1", "SUM", "MAX", "MIN",
             "AVG", "F64"]
    for n in range(s.args.cases):
        if n % 2 == 0:
            original = one if n % 4 == 0 else four
            data, how = s.mutate_bytes(binaries[original])
            bad = s.path("case.plan")
            open(bad, "wb").write(data)
        else:
            edited, how = s.mutate_text(source, words=enums)
            bad = s.path("case.txtplan")
            open(bad, "w").write(edited)
        done = s.run(f"plan, {how}", [s.tool("tessera-run"), bad,
                                      "--check-plan"], keep=[bad])
        # A damaged plan that still checks out must run cleanly too.
        if done and done.returncode == 0 and "1 ranks" in done.stdout:
            s.run(f"plan that checked out, {how}",
                  [s.tool("tessera-run"), bad, "--steps", "1"], keep=[bad])


def suite_ir(s):
    models = [s.example(name) for name in ("mlp_megatron.mlir",
                                           "gpt_block.mlir")]
    texts = {m: open(m).read() for m in models}
    ops = ["nn.add", "nn.mul", "nn.dot", "nn.softmax", "nn.gelu",
           "nn.layer_norm", "nn.reshape", "nn.transpose", "f32", "bf16",
           "i32", "\"dp\"", "\"tp\"", "contracting_dims", "dims"]
    for n in range(s.args.cases):
        model = models[n % len(models)]
        edited, how = s.mutate_text(texts[model], words=ops)
        bad = s.path("case.mlir")
        open(bad, "w").write(edited)
        s.run(f"{os.path.basename(model)}, {how}",
              [s.tool("tessera"), "compile", bad, "--mesh", "dp=2,tp=2",
               "--train", "adamw", "-o", s.path("case-out.plan")],
              keep=[bad])


def suite_cli(s):
    model = s.example("mlp_megatron.mlir")
    plan = s.path("cli.plan")
    s.compile("mlp.mlir", plan)
    values = ["-1", "0", "nan", "inf", "1e309", "99999999999999999999",
              str(2**62), "", "abc", "0x10", "-0", "1.5"]
    tables = [
        ([s.tool("tessera"), "compile", model, "-o", s.path("cli-out.plan")],
         ["--mesh", "--microbatches", "--pp", "--lr", "--zero",
          "--bucket-bytes", "--memory-limit", "--prefetch", "--devices",
          "--weight-decay"]),
        ([s.tool("tessera"), "compile", s.example("mlp.mlir"), "--train",
          "adamw", "--pp", "2", "--microbatches", "2", "--schedule",
          "interleaved", "-o", s.path("cli-out.plan")],
         ["--virtual", "--microbatches", "--pp"]),
        ([s.tool("tessera"), "model", "gpt", "-o", s.path("cli-model.mlir")],
         ["--layers", "--hidden", "--heads", "--seq", "--vocab", "--batch",
          "--dropout"]),
        ([s.tool("tessera"), "plan", model, "--machine", "dgx-h100"],
         ["--devices", "--top", "--dp", "--tp", "--pp", "--microbatches"]),
        ([s.tool("tessera-run"), plan],
         ["--steps", "--threads", "--seed", "--comm-timeout", "--time"]),
        ([s.tool("tessera"), "gradcheck", s.example("mlp.mlir")],
         ["--eps", "--tolerance", "--samples"]),
        ([s.tool("tessera"), "run", plan, "--ranks", "1"],
         ["--ranks", "--steps", "--seed"]),
        ([s.tool("tessera"), "verify", s.example("mlp.mlir"), "--train",
          "adamw"],
         ["--steps", "--seed", "--tolerance"]),
    ]
    for n in range(s.args.cases):
        base, options = tables[n % len(tables)]
        option = s.rng.choice(options)
        value = s.rng.choice(values)
        command = base + [option, value]
        s.run(f"{os.path.basename(base[0])} {option} '{value}'", command)


def suite_files(s):
    plan = s.path("files.plan")
    inputs = s.path("inputs.tensors")
    checkpoint = s.path("ckpt")
    s.compile("mlp.mlir", plan)
    s.setup([s.tool("tessera-run"), plan, "--steps", "1", "--dump-inputs",
             inputs])
    shutil.rmtree(checkpoint, ignore_errors=True)
    s.setup([s.tool("tessera-run"), plan, "--steps", "2",
             "--save-checkpoint", checkpoint])
    good = open(inputs, "rb").read()
    files = sorted(os.listdir(checkpoint))
    for n in range(s.args.cases):
        if n % 2 == 0:
            data, how = s.mutate_bytes(good)
            bad = s.path("case.tensors")
            open(bad, "wb").write(data)
            # Damaged inputs may load only if they are still a whole tensor
            # file of the plan's inputs (an edit of a value's bits): the
            # format has no checksum of its own.
            s.run(f"--inputs, {how}", [s.tool("tessera-run"), plan,
                                       "--steps", "1", "--inputs", bad],
                  keep=[bad])
            continue
        bad = s.path("case-ckpt")
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(checkpoint, bad)
        name = files[n // 2 % len(files)]
        target = os.path.join(bad, name)
        original = open(target, "rb").read()
        if name.endswith(".txt"):
            edited, how = s.mutate_text(original.decode())
            data = edited.encode()
        else:
            data, how = s.mutate_bytes(original)
        open(target, "wb").write(data)
        # Any change to a checkpoint must be refused: its checksums cover
        # every byte of it (index.txt's own, each rank's index file's in
        # index.txt, each tensors file's in its index). An edit may leave
        # the bytes as they were (a number replaced by itself).
        s.run(f"checkpoint {name}, {how}",
              [s.tool("tessera-run"), plan, "--steps", "1",
               "--load-checkpoint", bad], keep=[bad],
              must_fail=data != original)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", choices=["plan", "ir", "cli", "files"])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--examples", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=100)
    args = parser.parse_args()
    s = Suite(args)
    {"plan": suite_plan, "ir": suite_ir, "cli": suite_cli,
     "files": suite_files}[args.suite](s)
    print(f"adversarial {args.suite}: {s.cases} cases, "
          f"{len(s.findings)} findings (seed {args.seed})")
    print(f"{s.accepted} ran, {s.refused} refused with an error")
    return 1 if s.findings else 0


if __name__ == "__main__":
    sys.exit(main())
