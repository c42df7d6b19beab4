# Sourced by the CLI tests that open a window: xvfb CMD... runs CMD under a private Xvfb.
# The server picks a free display itself and reports it once it accepts connections (-displayfd),
# so tests running at once never race for a display number as xvfb-run -a can. Returns CMD's
# status; if the server does not start, says why on stderr and returns 125.
xvfb() {
  local dir pid num rc i
  dir=$(mktemp -d)
  Xvfb -displayfd 3 -screen 0 640x480x24 -nolisten tcp 3>"$dir/display" 2>"$dir/log" &
  pid=$!
  for i in $(seq 1 300); do
    [ -s "$dir/display" ] || ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.1
  done
  num=$(head -n 1 "$dir/display")
  if [ -z "$num" ]; then
    echo "Xvfb did not start: $(cat "$dir/log")" >&2
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"
    return 125
  fi
  DISPLAY=":$num" "$@"; rc=$?
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  rm -rf "$dir"
  return $rc
}
