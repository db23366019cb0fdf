#!/usr/bin/env python3
"""lesson_figures.py -- every figure a lesson quotes, against what the program prints now.

A stale number in a lesson fails the build, as a stale line count does in reading_path.py.
The lessons (docs/lessons/en and zh, README first, then 01, 02, ...) mark what is checked:

  <!-- check -->          on the line before a ```sh block: the block's commands run (bash,
                          from the top of the tree, `make ...` lines skipped: the target built
                          them), and every line of it that starts with "# " and follows a
                          command is output the program must print (a line of its output,
                          spaces aside; "..." stands for anything).
  <!-- check: CMD -->     on the line before a ``` block: CMD runs, and every line of the block
                          must be a line of its output ("..." lines skipped). $SOL in CMD is
                          the folder of the built solutions (--solutions).
  NUMBER<!-- fig: RE -->  in the text: the regular expression RE, searched in the outputs of
                          the checks so far (this lesson's and the ones before it, the latest
                          first), must capture NUMBER (commas aside; a number quoted with fewer
                          decimals is the printed one rounded).

Integers and text must be as quoted; a number with a decimal point or an exponent may differ by
0.1% (REL), or both be below 1e-12 (NOISE): the BLAS kernels of two CPUs sum in other orders, so
a 300-step run ends a few units of the fourth digit apart (6.4837 with Haswell's kernels, 6.4825
with SkylakeX's), while a stale figure is off by more.

"/tmp/" in commands and outputs stands for a scratch folder of this run. A command block
that is the same in en and zh runs once. With --run-rest, every program in the solutions'
folder that no check ran as it stands (`$SOL/NAME`, no arguments) then runs too, and must exit
0: with a build alone (make all), that is the exercises' `make run`, less the runs the lessons
made already (lesson 17's is seconds long). Exit 0 when every figure holds, 1 when one does
not (each named: lesson, line, what it says, what the program prints), 2 when a check or a
program cannot run.

  python3 tools/lesson_figures.py --solutions build/lessons/exercises/build [--only 11] [--run-rest]
"""
import argparse
import difflib
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHECK = re.compile(r"^<!-- check(?::\s*(.*?))?\s*-->\s*$")
FIG = re.compile(r"([-+]?[0-9][0-9,]*(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)\s*(?:[%a-zA-Z/]+\s*)?<!-- fig: (.*?) -->")


def norm(line):
    return " ".join(line.split())


NUM = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?")
REL = 1e-3      # a quoted decimal and the printed one agree to 0.1% (near)
NOISE = 1e-12   # two values this small are both rounding residue (9.4e-16 and 8.1e-16)


def near(quoted, printed):
    """an integer exactly; a decimal within REL, or both below NOISE: the BLAS kernels of two
    CPUs (SkylakeX, Haswell) sum in other orders, so a run's last digits differ (6.4837, 6.4825)"""
    if not re.search(r"[.e]", quoted):
        return quoted == printed
    q, p = float(quoted), float(printed)
    return abs(q - p) <= REL * max(abs(q), abs(p)) or max(abs(q), abs(p)) < NOISE


def matches(want, got_lines):
    """want (one quoted line, "..." for anything) against the output's lines: the text the same,
    the numbers near"""
    pat, nums = [], []
    for part in norm(want).split("..."):
        bits = re.split("(" + NUM.pattern + ")", part)   # text, number, text, ...
        nums += bits[1::2]
        pat.append("".join(re.escape(b) if k % 2 == 0 else "(" + NUM.pattern + ")" for k, b in enumerate(bits)))
    pat = "^" + ".*".join(pat) + "$"
    for g in got_lines:
        m = re.match(pat, g)
        if m and all(near(q, v) for q, v in zip(nums, m.groups())):
            return True
    return False


class Runner:
    def __init__(self, scratch, sol, timeout):
        self.scratch, self.sol, self.timeout, self.cache = scratch, sol, timeout, {}
        self.outputs = []   # every check's output so far, the latest first (fig searches them)

    def local(self, text):
        return text.replace("/tmp/", self.scratch + "/").replace("$SOL", self.sol)

    def run(self, script, where):
        script = self.local(script)
        key = uncommented(script)
        if key not in self.cache:
            r = subprocess.run(["bash", "-c", "set -eo pipefail\n" + script], capture_output=True, text=True,
                               timeout=self.timeout)
            if r.returncode != 0:
                raise RuntimeError("%s: the commands failed (exit %d):\n%s\n%s" % (where, r.returncode, script,
                                                                                  r.stderr[-2000:]))
            self.cache[key] = r.stdout + r.stderr
        return self.cache[key]


def uncommented(script):
    """script less its trailing "  # ..." comments (outside quotes): an en block and its zh twin,
    the same commands commented in two languages, run once"""
    lines = []
    for line in script.split("\n"):
        m = re.search(r"\s+#\s.*$", line)
        if m and line[:m.start()].count("'") % 2 == 0 and line[:m.start()].count('"') % 2 == 0:
            line = line[:m.start()]
        lines.append(line.rstrip())
    return "\n".join(lines)


def sh_block(lines):
    """a ```sh block's lines -> (its script, [(index, quoted output line)])"""
    cmds, outs, cont = [], [], False
    for i, line in enumerate(lines):
        if line.startswith("# ") and cmds and not cont:
            outs.append((i, line[2:]))
        elif line.strip() and not line.startswith("#"):
            if line.startswith("make ") and not cont:   # built by the target; what follows && runs
                line = line.split(" && ", 1)[1] if " && " in line else ""
            if line:
                cmds.append(line)
            cont = line.rstrip().endswith("\\")
    return "\n".join(cmds), outs


def check_file(path, R, fails):
    lines = open(path, encoding="utf-8").read().split("\n")
    outputs, i = R.outputs, 0
    while i < len(lines):
        m = CHECK.match(lines[i])
        for fm in FIG.finditer(lines[i]):
            fig(path, i + 1, fm.group(1), fm.group(2), outputs, R, fails)
        if not m:
            i += 1
            continue
        j = i + 2
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[i + 2:j]
        if m.group(1):
            out = R.run(m.group(1), "%s:%d" % (path, i + 1))
            quoted = [(k, l) for k, l in enumerate(body) if l.strip() and l.strip() != "..."]
        else:
            script, quoted = sh_block(body)
            out = R.run(script, "%s:%d" % (path, i + 1))
        outputs.insert(0, out)
        got = [norm(l) for l in out.split("\n")]
        for k, want in quoted:
            if not matches(R.local(want), got):
                close = difflib.get_close_matches(norm(R.local(want)), got, n=1, cutoff=0) or ["(nothing)"]
                fails.append("%s:%d: the lesson says\n    %s\n  the program prints\n    %s" %
                             (path, i + 3 + k, want.strip(), close[0].replace(R.scratch + "/", "/tmp/")))
        i = j + 1


def same_number(quoted, printed):
    """equal, or printed rounded to quoted's decimals (3.69 quotes 3.6862, 1.8e-9 quotes 1.776e-09)"""
    q, p = quoted.replace(",", ""), printed.replace(",", "")
    if q == p:
        return True
    try:
        if "e" in q.lower():   # 1.8e-9 quotes 1.776356839e-09: the mantissa rounded
            m = q.lower().split("e")[0]
            return float(q) == float("%.*e" % (len(m.split(".")[1]) if "." in m else 0, float(p)))
        d = len(q.split(".")[1]) if "." in q else None
        return d is not None and (float(q) == round(float(p), d) or near(q, p))
    except ValueError:
        return False


def fig(path, line, number, regex, outputs, R, fails):
    for out in outputs:
        m = re.search(regex, out)
        if m:
            if not same_number(number, m.group(1)):
                fails.append("%s:%d: the lesson says %s, the program prints %s (%s)" % (path, line, number,
                                                                                    m.group(1), regex))
            return
    fails.append("%s:%d: %s: no output of the checks so far matches %s" % (path, line, number, regex))


def run_rest(R):
    """every program in $SOL no check ran bare: it must exit 0; how many ran"""
    done = {s.strip() for s in R.cache}
    rest = [p for p in sorted(glob.glob(os.path.join(R.sol, "*")))
            if os.access(p, os.X_OK) and os.path.isfile(p) and p not in done]
    for p in rest:
        r = subprocess.run([p], capture_output=True, text=True, timeout=R.timeout, cwd=R.scratch)
        if r.returncode != 0:
            raise RuntimeError("%s failed (exit %d):\n%s" % (p, r.returncode, (r.stdout + r.stderr)[-2000:]))
    return len(rest)


def lessons(root, only):
    for lang in ("en", "zh"):
        files = [os.path.join(root, "docs/lessons", lang, "README.md")]
        files += sorted(glob.glob(os.path.join(root, "docs/lessons", lang, "[0-9][0-9]-*.md")))
        for f in files:
            if not only or os.path.basename(f).startswith(tuple(only)) or f.endswith("README.md"):
                yield f


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--solutions", default="build/lessons/exercises/build", help="the built solutions ($SOL)")
    ap.add_argument("--only", nargs="*", help="lesson numbers (01 ...); README always runs first")
    ap.add_argument("--timeout", type=float, default=120, help="seconds a block may take")
    ap.add_argument("--run-rest", action="store_true", help="then every solution no check ran, which must exit 0")
    ap.add_argument("files", nargs="*", help="these lessons instead (README's setup first)")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    scratch = tempfile.mkdtemp(prefix="lesson_figures_")
    R, fails = Runner(scratch, os.path.abspath(a.solutions), a.timeout), []
    files = list(lessons(root, a.only)) if not a.files else ["docs/lessons/en/README.md"] + a.files
    try:
        for f in files:
            check_file(os.path.relpath(f, root), R, fails)
        rest = run_rest(R) if a.run_rest else 0
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print("lesson_figures: %s" % e, file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for f in fails:
        print(f)
    n = len(R.cache)
    print("lesson_figures: %d command blocks run%s; %s" % (n, ", then %d solutions no lesson runs" % rest if rest else "",
                                                          "%d stale figures" % len(fails) if fails else "every figure holds"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
