#!/bin/sh
# Compiles a model with `tessera compile`, replays the pipeline that
# `tessera compile --print-pipeline` prints for the same arguments in
# tessera-opt, and fails unless both plans are byte-identical. With --auto,
# the replay reads the model that --emit nn annotates.
#
# usage: replay.sh TESSERA TESSERA_OPT OUT_PREFIX MODEL [compile args...]
set -e
tessera=$1 opt=$2 out=$3
shift 3
"$tessera" compile "$@" -o "$out.compile.plan" > /dev/null 2>&1
"$tessera" compile "$@" -o "$out.replay.plan" --print-pipeline |
  grep -v '^#' | sed "s|ANNOTATED.mlir|$out.annotated.mlir|" > "$out.replay.sh"
case " $* " in
*" --auto "*)
  "$tessera" compile "$@" --emit nn -o "$out.annotated.mlir" 2> /dev/null ;;
esac
PATH="$(dirname "$opt"):$PATH" sh "$out.replay.sh"
cmp "$out.compile.plan" "$out.replay.plan"
echo "identical: $*"
