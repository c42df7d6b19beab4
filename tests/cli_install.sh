#!/usr/bin/env bash
# terra as a package: the core alone configures with a C compiler and CMake only (pkg-config
# disabled, no outside library looked for), builds and installs; everything with shared
# libraries installs headers, static and shared libraries (versioned soname, only the API
# exported), the programs, a CMake package and a .pc per library. Small programs built against
# each install (tests/consumer: find_package and pkg-config, static and shared) run and read back
# an archive they baked. Skipped (exit 77) under sanitizers: the installs build without them.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${TERRA_SANITIZE:-}" ]; then
  echo "skip: the install test builds terra afresh, without sanitizers (TERRA_SANITIZE=$TERRA_SANITIZE)"
  exit 77
fi
CC=${TERRA_CC:-cc}
JOBS=$(nproc)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
# run NAME CMD...: CMD exits 0 (its output in $T/log.NAME, shown on failure)
run() {
  local name=$1
  shift
  if "$@" >"$T/log" 2>&1; then ok "$name"; else bad "$name: $(tail -c 1500 "$T/log")"; fi
}
has() { [ -e "$1" ] && ok "installed $(basename "$1")" || bad "not installed: $1"; }
hasnt() { [ ! -e "$1" ] && ok "left out $(basename "$1")" || bad "installed though not built: $1"; }
# consumer NAME PREFIX ARGS...: the CMake consumer against PREFIX, built and run
consumer() {
  local name=$1 prefix=$2
  shift 2
  run "$name: configure" cmake -S "$SRC/tests/consumer" -B "$T/c-$name" -DCMAKE_C_COMPILER="$CC" \
    -DCMAKE_PREFIX_PATH="$prefix" "$@"
  run "$name: build" cmake --build "$T/c-$name"
  run "$name: runs" "$T/c-$name/consumer" "$T/$name.terra"
}

# ---- the core alone ---------------------------------------------------------------------------
core=$T/core-prefix
run "core: configure without pkg-config" cmake -S "$SRC" -B "$T/core" -DCMAKE_C_COMPILER="$CC" \
  -DTERRA_BUILD_IO=OFF -DTERRA_BUILD_ODE=OFF -DTERRA_BUILD_SCRIPT=OFF -DTERRA_BUILD_HTTP=OFF -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -DCMAKE_INSTALL_PREFIX="$core"
run "core: build" cmake --build "$T/core" -j "$JOBS"
run "core: install" cmake --install "$T/core"
has "$core/include/terra/terra.h"
has "$core/lib/libterra.a"
has "$core/lib/pkgconfig/terra.pc"
has "$core/lib/cmake/terra/terraConfig.cmake"
hasnt "$core/include/terra/gl.h"
hasnt "$core/lib/pkgconfig/terra-io.pc"
hasnt "$core/bin/terra"
for h in "$core"/include/terra/*.h; do # each installed header stands alone
  echo "#include <terra/$(basename "$h")>" | $CC -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$core/include" -x c - ||
    bad "core: $(basename "$h") does not compile alone"
done
consumer core-find-package "$core" -DTERRA_PARTS=core
run "core: pkg-config --static builds" bash -c "PKG_CONFIG_PATH='$core/lib/pkgconfig' && export PKG_CONFIG_PATH &&
  $CC -std=c11 -Wall -Werror -o '$T/pc-core' '$SRC/tests/consumer/main.c' \$(pkg-config --static --cflags --libs terra)"
run "core: pkg-config program runs" "$T/pc-core"

# ---- everything, shared libraries too -----------------------------------------------------------
full=$T/prefix
run "full: configure (BUILD_SHARED_LIBS)" cmake -S "$SRC" -B "$T/full" -DCMAKE_C_COMPILER="$CC" \
  -DBUILD_SHARED_LIBS=ON -DTERRA_BUILD_TESTS=OFF -DTERRA_BUILD_BENCH=OFF -DCMAKE_INSTALL_PREFIX="$full"
run "full: build" cmake --build "$T/full" -j "$JOBS"
run "full: install" cmake --install "$T/full"
for lib in terra terra-io terra-gdal terra-cook terra-gl terra-ode; do
  has "$full/lib/lib$lib.a"
  has "$full/lib/pkgconfig/$lib.pc"
  soname=$(readelf -d "$full/lib/lib$lib.so" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
  [ "$soname" = "lib$lib.so.0.1" ] && ok "$lib: soname $soname" || bad "$lib: soname '$soname'"
  # only the API: every exported function is terra_*, declared in an installed header (or, for
  # another of terra's libraries, TERRA_INTERNAL in one that is not installed)
  others=$(nm -D --defined-only "$full/lib/lib$lib.so" | awk '$2 == "T" && $3 !~ /^terra_/ { print $3 }')
  [ -z "$others" ] && ok "$lib: exports terra_* only" || bad "$lib: exports $others"
  for f in $(nm -D --defined-only "$full/lib/lib$lib.so" | awk '$2 == "T" { print $3 }'); do
    grep -q "\b$f(" "$full"/include/terra/*.h || grep -rq "^TERRA_INTERNAL .*\b$f(" "$SRC"/src "$SRC"/io ||
      bad "$lib: exports $f, which no installed header declares"
  done
done
for p in terra terra-raster terra-scenery terra-gl terra-cook terra-drive terra-http; do has "$full/bin/$p"; done
run "installed terra runs" "$full/bin/terra" --version
run "installed terra runs terra-cook beside it" "$full/bin/terra" cook --help
consumer io-shared "$full" -DTERRA_PARTS=io
ldd "$T/c-io-shared/consumer" | grep -q "libterra-io.so.0.1" && ok "io-shared: uses libterra-io.so" ||
  bad "io-shared: does not use the shared library: $(ldd "$T/c-io-shared/consumer")"
consumer all-shared "$full" -DTERRA_PARTS=all
consumer all-static "$full" -DTERRA_PARTS=all -DTERRA_STATIC=ON
ldd "$T/c-all-static/consumer" | grep -q "libterra" && bad "all-static: uses a shared terra library" ||
  ok "all-static: no shared terra library"
run "io: pkg-config builds (shared)" bash -c "PKG_CONFIG_PATH='$full/lib/pkgconfig' && export PKG_CONFIG_PATH &&
  $CC -std=c11 -Wall -Werror -DTERRA_CONSUMER_IO -o '$T/pc-io' '$SRC/tests/consumer/main.c' \$(pkg-config --cflags --libs terra-io) -lm"
run "io: pkg-config program runs" env LD_LIBRARY_PATH="$full/lib" "$T/pc-io" "$T/pc-io.terra"

[ "$fails" -eq 0 ] && echo "all install checks passed" || echo "$fails install checks failed"
[ "$fails" -eq 0 ]
