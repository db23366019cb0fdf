#!/bin/sh
# embed_web.sh FILE... -- the page's files as C arrays (build/gen/serve_web.inc, read by
# src/serve/http.c): web_files[] = { "/name", content type, bytes, size }. No network,
# no build step beyond od and sed.
set -e
i=0
for f in "$@"; do
  printf 'static const unsigned char web_%d[] = {\n' "$i"
  od -An -v -tx1 "$f" | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' -e 's/^/  /'
  printf '  0x00};\n'
  i=$((i + 1))
done
printf 'static const web_file web_files[] = {\n'
i=0
for f in "$@"; do
  name=$(basename "$f")
  case "$name" in
    *.html) type='text/html; charset=utf-8' ;;
    *.js) type='text/javascript; charset=utf-8' ;;
    *.css) type='text/css; charset=utf-8' ;;
    *.png) type='image/png' ;;
    *.svg) type='image/svg+xml' ;;
    *) type='application/octet-stream' ;;
  esac
  size=$(wc -c < "$f" | tr -d ' ')
  printf '  {"/%s", "%s", web_%d, %s},\n' "$name" "$type" "$i" "$size"
  i=$((i + 1))
done
printf '};\n'
