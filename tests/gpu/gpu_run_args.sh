# The command line every GPU check and benchmark script takes, in one place: `source` this file
# with the script's own arguments ("OUT_DIR [--native-only]"). Sets `out`, `native_only` (0 or 1)
# and `repo` (the checkout's root, which becomes the working directory). Bad arguments: usage, exit 2.
usage() { echo "usage: $0 OUT_DIR [--native-only]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
out="$1"; shift
native_only=0
for arg in "$@"; do
  case "$arg" in
    --native-only) native_only=1 ;;
    *) usage ;;
  esac
done
repo="$(cd "$(dirname "${BASH_SOURCE[1]}")/../.." && pwd)"
cd "$repo" || exit 1
