#!/usr/bin/env bash
# Fails when git tracks a file that does not belong in the repository: a build
# output or any other binary, or a file too large to review.
#
# The rule, applied to what git tracks (the index, so a staged file counts):
#   - binary: git sees the file's content as binary (a NUL byte in its first
#     8000 bytes: `git ls-files --eol` shows i/-text). That catches ELF, Mach-O
#     and PE executables, archives and object files. Image assets whose format
#     is binary by nature (.png .jpg .jpeg .gif .ico .webp) may be tracked.
#   - large: the file is over MAX_BYTES (1 MiB), whatever its kind.
#   - exceptions: a path listed in ALLOWED below passes both checks; say why
#     beside it. None today.
set -o errexit -o nounset -o pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly MAX_BYTES=$((1024 * 1024))
readonly ASSET_EXT_RE='\.(png|jpg|jpeg|gif|ico|webp)$'
# Paths that may be binary or large, one per element, each with a reason.
readonly ALLOWED=()

allowed() {
  local p
  for p in "${ALLOWED[@]}"; do [[ "$1" == "$p" ]] && return 0; done
  return 1
}

bad=()
# Binary content: the index's end-of-line view says -text.
while IFS=$'\t' read -r -d '' info path; do
  [[ "$info" == i/-text* ]] || continue
  [[ "$path" =~ $ASSET_EXT_RE ]] && continue
  allowed "$path" || bad+=("binary: $path")
done < <(git ls-files -z --eol)
# Size of each staged blob (a submodule, mode 160000, has none here).
while read -r size path; do
  ((size > MAX_BYTES)) || continue
  allowed "$path" || bad+=("$size bytes (over $MAX_BYTES): $path")
done < <(git ls-files --format='%(objectmode) %(objectname) %(path)' |
  awk '$1 != "160000" { sub(/^[^ ]* /, ""); print }' |
  git cat-file --batch-check='%(objectsize) %(rest)')

if ((${#bad[@]} > 0)); then
  printf 'verify-tracked: git tracks files that do not belong in it:\n' >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo 'verify-tracked: git rm --cached them and ignore build outputs in .gitignore (or add a reasoned exception to ALLOWED in scripts/verify-tracked.sh)' >&2
  exit 1
fi
echo "verify-tracked: no binary or file over $MAX_BYTES bytes is tracked"
