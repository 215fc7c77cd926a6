"""Runs every command the README shows, in order, and fails when one breaks.

Usage: readme_walkthrough.py SOURCE_DIR BIN_DIR WORK_DIR

Every ```sh block of README.md runs with bash (-e, pipefail) in WORK_DIR,
where `build/bin`, `examples` and `README.md` lead to the built tools, the
examples and the README, and the tools are on PATH; every ```python block runs with the prelude
below, which defines the `model` and `ids` its fragment uses. Blocks run
in README order, so a later block reads what an earlier one wrote, as a
reader following the README would. Blocks without a language (usage
synopses, the layout) are text. Sizes that would take long are made small
(SMALL); scripts/test.sh, the suite this test belongs to, is not run.
"""
import os
import re
import subprocess
import sys

# README text -> what the walk-through runs instead: the same command at a
# size this machine runs in seconds.
SMALL = [
    ("--devices 64", "--devices 4"),
    ("--steps 10", "--steps 2"),
]
SKIP = {"scripts/test.sh"}
# A language model of bytes for the README's export fragment: an
# embedding, a GELU MLP and a head, 4 sequences of 16 ids.
PRELUDE = """
import torch
torch.manual_seed(0)

class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(256, 32)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)
        self.head = torch.nn.Linear(32, 256)

    def forward(self, ids):
        x = self.embed(ids)
        x = x + self.down(torch.nn.functional.gelu(self.up(x)))
        return self.head(x)

model = TinyLM()
ids = torch.randint(0, 256, (4, 16))
"""


def blocks(readme):
    """(line, language, text) of each fenced block with a language."""
    lines = open(readme, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        match = re.match(r"^\s*```(\w+)\s*$", lines[i])
        if not match:
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        while not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        i += 1
        yield start, match.group(1), "\n".join(body) + "\n"


def main():
    source, bin_dir, work = sys.argv[1:4]
    os.makedirs(os.path.join(work, "build"), exist_ok=True)
    for link, target in [("build/bin", bin_dir),
                         ("examples", os.path.join(source, "examples")),
                         ("README.md", os.path.join(source, "README.md"))]:
        path = os.path.join(work, link)
        if not os.path.islink(path):
            os.symlink(target, path)
    env = dict(os.environ)
    env["PATH"] = bin_dir + os.pathsep + env["PATH"]
    # scripts/example.sh builds first; this tree is built.
    env["TESSERA_SKIP_SETUP"] = "1"
    ran = 0
    for line, language, text in blocks(os.path.join(source, "README.md")):
        for readme_text, small in SMALL:
            text = text.replace(readme_text, small)
        if language == "sh":
            commands = [c for c in text.splitlines()
                        if c.strip() and not c.strip().startswith("#")]
            if all(c.strip() in SKIP for c in commands):
                continue
            text = "\n".join(
                os.path.join(source, c) if c.strip().startswith("scripts/")
                and c.strip() not in SKIP else c
                for c in text.splitlines() if c.strip() not in SKIP)
            command = ["bash", "-e", "-o", "pipefail", "-c", text]
        elif language == "python":
            command = ["/usr/bin/python3", "-c", PRELUDE + text]
        else:
            continue
        result = subprocess.run(command, cwd=work, env=env, text=True,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        if result.returncode != 0:
            print(f"README.md:{line}: the {language} block failed "
                  f"(exit {result.returncode}):\n{text}\n--- output:\n"
                  + result.stdout[-4000:])
            sys.exit(1)
        print(f"README.md:{line}: {language} block ok")
        ran += 1
    print(f"walked through {ran} blocks")


main()
