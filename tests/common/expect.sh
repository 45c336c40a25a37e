# Shell helpers of the tests that run programs case by case (tests/unit/cli_parity.sh, cli_tools.sh),
# sourced after the test sets $case (its name) and $out (the file each command's output goes to).
#   fail MSG...          prints FAIL, MSG and the last output; exits 1
#   expect_rc CODE CMD...  runs CMD with stdout and stderr in $out; fails unless it exits with CODE
#   has REGEX / hasF TEXT  fails unless the last output has a line matching REGEX / holding TEXT
#   lacks REGEX          fails when the last output has a line matching REGEX
#   count REGEX N        fails unless exactly N lines of the last output match REGEX
fail() { echo "FAIL ($case): $*"; echo "---- output ----"; cat "$out" 2>/dev/null; exit 1; }
expect_rc() {
    want=$1; shift
    "$@" >"$out" 2>&1
    got=$?
    [ "$got" -eq "$want" ] || fail "exit status $got, expected $want: $*"
}
has() { grep -q -e "$1" "$out" || fail "output lacks: $1"; }
hasF() { grep -q -F -e "$1" "$out" || fail "output lacks: $1"; }
lacks() { ! grep -q -e "$1" "$out" || fail "output has: $1"; }
count() { n=$(grep -c -e "$1" "$out"); [ "$n" -eq "$2" ] || fail "'$1' printed $n times, expected $2"; }
