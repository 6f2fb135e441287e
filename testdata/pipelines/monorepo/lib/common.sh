# common.sh: helpers shared by every service.
greeting() { echo "hello, $1"; }
