#!/usr/bin/env python3
"""Prints 'N passed, N failed' for the test cases in Meson JUnit logs.

Input:  one or more meson-logs/testlog.junit.xml files (Meson writes them;
        with protocol 'gtest' they list every GoogleTest case).
Output: one line, 'N passed, N failed' (', N skipped' when some were);
        exit status 1 if any case failed or a suite crashed before reporting.
"""
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    passed = failed = skipped = 0
    for path in sys.argv[1:]:
        root = ET.parse(path).getroot()
        for case in root.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
