#!/usr/bin/env python3
"""The size rules of docs/architecture.md: no source file over 600 lines, no function over 60
lines outside src/kernels/ (where one loop nest is one function by design).

    tools/check_sizes.py [ROOT]     # exit 1 and a list when a rule is broken

A function is a brace block whose header (the text since the previous ';', '{' or '}' at the
same depth) has a parameter list and is not a class, namespace, enum or initialiser; its length
is counted from the header's first line to the closing brace, lambdas inside included.
"""
import re
import sys
from pathlib import Path

MAX_FILE, MAX_FUNCTION = 600, 60
DIRS = ["src", "apps", "include"]


def strip(text):
    """Comments and string/char literals blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end])); i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


NOT_FUNCTION = re.compile(r"\b(namespace|class|struct|enum|union)\b|=\s*$|\breturn\b")


def functions(text):
    s = strip(text)
    s = re.sub(r"(?m)^[ \t]*#.*$", lambda m: " " * len(m.group(0)), s)  # preprocessor lines
    stack = []  # (is_function, start_line)
    header_start = 0
    for i, c in enumerate(s):
        if c == "{":
            header = s[header_start:i]
            inside_function = any(f for f, _ in stack)
            is_fn = (not inside_function and ")" in header and not NOT_FUNCTION.search(header.strip()))
            first = header_start + (len(header) - len(header.lstrip()))
            stack.append((is_fn, s.count("\n", 0, first) + 1))
            header_start = i + 1
        elif c == "}":
            if stack:
                is_fn, start = stack.pop()
                if is_fn:
                    yield start, s.count("\n", 0, i) + 1
            header_start = i + 1
        elif c == ";":
            header_start = i + 1


def main(root):
    root = Path(root)
    problems = []
    for d in DIRS:
        for p in sorted((root / d).rglob("*")):
            if p.suffix not in (".cpp", ".h", ".hpp", ".c"):
                continue
            text = p.read_text(encoding="utf-8")
            lines = text.count("\n")
            rel = p.relative_to(root)
            if lines > MAX_FILE:
                problems.append(f"{rel}: {lines} lines (at most {MAX_FILE})")
            if str(rel).startswith("src/kernels/"):
                continue
            for start, end in functions(text):
                if end - start + 1 > MAX_FUNCTION:
                    problems.append(f"{rel}:{start}: a function of {end - start + 1} lines (at most {MAX_FUNCTION})")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent))
