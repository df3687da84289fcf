#!/bin/sh
# The layering of src/ (docs/ARCHITECTURE.md, "Layers"): a file may include headers of its own
# directory and of lower layers, never of a higher layer or of a sibling in its own layer, and a
# directory's private headers (below) only from its own files. Fails listing every such include.
# Usage: tests/host/test_layers.sh [path/to/src]
SRC=${1:-src}
rank() {
    case $1 in
    core) echo 0 ;;
    autograd) echo 1 ;;
    ops) echo 2 ;;
    optim | io | plot | tasks) echo 3 ;;
    nn) echo 4 ;;
    interp) echo 5 ;;
    lua) echo 6 ;;
    host) echo 7 ;;
    *) echo unknown ;;
    esac
}
# Headers private to their directory: the ops' shared helpers, what interp.c lends interchange.c.
PRIVATE="ops/kernel_util.h ops/op_util.h interp/interp_private.h"
bad=0
files=$(find "$SRC" -name '*.[ch]' | sort)
[ -n "$files" ] || { echo "no sources under $SRC"; exit 1; }
for f in $files; do
    layer=${f#"$SRC"/}
    layer=${layer%%/*}
    from=$(rank "$layer")
    if [ "$from" = unknown ]; then
        echo "$f: directory '$layer' has no layer; add it to tests/host/test_layers.sh and docs/ARCHITECTURE.md"
        bad=1
        continue
    fi
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"/]*\)\/[^"]*".*/\1/p' "$f"); do
        to=$(rank "$inc")
        if [ "$to" = unknown ] || [ "$to" -gt "$from" ] || { [ "$to" -eq "$from" ] && [ "$inc" != "$layer" ]; }; then
            echo "$f includes $inc/: $layer must not depend on it"
            bad=1
        fi
    done
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case " $PRIVATE " in
        *" $inc "*) if [ "${inc%%/*}" != "$layer" ]; then
            echo "$f includes $inc: private to $SRC/${inc%%/*}/"
            bad=1
        fi ;;
        esac
    done
done
[ $bad -eq 0 ] && echo "layers ok: $(echo "$files" | wc -l) files"
exit $bad
