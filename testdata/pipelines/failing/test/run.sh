#!/bin/sh
# run.sh: the unit tests of calc.sh; writes test-report.txt.
set -u
fails=0
check() {
  got=$(sh src/calc.sh "$1" "$2" "$3")
  if [ "$got" = "$4" ]; then echo "PASS $1 $2 $3 = $4"; else echo "FAIL $1 $2 $3: got $got, want $4"; fails=$((fails + 1)); fi
}
check add 2 3 5 | tee -a test-report.txt
check mul 2 3 6 | tee -a test-report.txt
if grep -q '^FAIL' test-report.txt; then echo "tests failed"; exit 1; fi
echo "all tests passed"
