# Sourced by kjit's scripts before they do anything: -h or --help prints the script's header
# comment (what it does and its usage) and exits.
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
