"""Checks the page of `tessera report` as Chromium rendered it.

Usage: check_report.py PAGE.html DOM.html CHROMIUM.log KEY=COUNT...

PAGE is the file tessera wrote, DOM what `chromium --headless --dump-dom`
made of it, and the log Chromium's stderr with --enable-logging. The page
must load nothing from elsewhere, the browser must report no console
message or failed load, and each KEY (an SVG's class, or "SVGCLASS
SHAPE", SHAPE a class or a tag inside that SVG) must count COUNT elements in the rendered DOM; COUNT+ means
at least that many.
"""
import re
import sys
from html.parser import HTMLParser


class Counter(HTMLParser):
    def __init__(self):
        super().__init__()
        self.svgs = []  # class of each <svg>, in order
        self.shapes = {}  # (svg class, shape class) -> count
        self.current = None
        self.closed = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "svg":
            self.current = classes[0] if classes else ""
            self.svgs.append(self.current)
        elif self.current is not None:
            for name in [tag] + classes:
                key = (self.current, name)
                self.shapes[key] = self.shapes.get(key, 0) + 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.current = None
        if tag == "html":
            self.closed = True


def main():
    page, dom, log = sys.argv[1:4]
    failures = []
    text = open(page, encoding="utf-8").read()
    # Self-contained: no script, stylesheet, image or frame from anywhere,
    # and no URL but the SVG namespace.
    for pattern in [r"<script\b[^>]*\bsrc=", r"<link\b", r"<img\b",
                    r"<iframe\b", r"url\("]:
        if re.search(pattern, text):
            failures.append("the page references an outside resource: "
                            + pattern)
    for url in re.findall(r"https?://[^\"' )]+", text):
        if url != "http://www.w3.org/2000/svg":
            failures.append("the page names the URL " + url)
    errors = [line for line in open(log, encoding="utf-8", errors="replace")
              if "CONSOLE" in line or "Uncaught" in line
              or "Failed to load" in line or "ERR_" in line]
    failures += ["Chromium: " + line.strip() for line in errors]
    counter = Counter()
    counter.feed(open(dom, encoding="utf-8").read())
    if not counter.closed or not counter.svgs:
        failures.append("Chromium rendered no page with figures")
    for check in sys.argv[4:]:
        key, want = check.rsplit("=", 1)
        parts = key.split()
        if len(parts) == 1:
            got = counter.svgs.count(parts[0])
        else:
            got = counter.shapes.get((parts[0], parts[1]), 0)
        ok = got >= int(want[:-1]) if want.endswith("+") else got == int(want)
        if not ok:
            failures.append(f"{key}: {got} elements, expected {want}")
    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        sys.exit(1)
    print("report ok: " + ", ".join(counter.svgs))


main()
