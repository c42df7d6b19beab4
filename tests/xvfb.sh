# Sourced by the CLI tests that open a window: xvfb CMD... runs CMD under a private Xvfb.
# The server picks a free display itself and reports it once it listens (-displayfd), so tests
# running at once never race for a display number as xvfb-run -a can; CMD starts only once a client
# can open the display (XOpenDisplay through libX11, as GLFW opens it), and a server that does not
# get there within 10 s is replaced by a new one (three tries). Returns CMD's status (125: no
# server would start); where CMD fails, the server's log goes to stderr.
xvfb_opens() { # whether a client can open DISPLAY
  python3 -c 'import ctypes, sys
x = ctypes.CDLL("libX11.so.6"); x.XOpenDisplay.restype = ctypes.c_void_p
d = x.XOpenDisplay(None)
sys.exit(1 if not d else x.XCloseDisplay(ctypes.c_void_p(d)) * 0)' 2>/dev/null
}

xvfb() {
  local dir pid num rc i try
  dir=$(mktemp -d)
  for try in 1 2 3; do
    : >"$dir/display"
    Xvfb -displayfd 3 -screen 0 640x480x24 -nolisten tcp 3>"$dir/display" 2>"$dir/log" &
    pid=$!
    num=
    for i in $(seq 1 100); do
      if [ -z "$num" ] && [ -s "$dir/display" ]; then num=$(head -n 1 "$dir/display"); fi
      if [ -n "$num" ] && DISPLAY=":$num" xvfb_opens; then break; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ -n "$num" ] && DISPLAY=":$num" xvfb_opens; then break; fi
    echo "xvfb: try $try: Xvfb ${num:+on :$num }not open to clients: $(cat "$dir/log")" >&2
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    num=
  done
  if [ -z "$num" ]; then
    rm -rf "$dir"
    return 125
  fi
  DISPLAY=":$num" "$@"; rc=$?
  [ $rc -eq 0 ] || echo "xvfb: $1 exited $rc on :$num; the server's log: $(cat "$dir/log")" >&2
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  rm -rf "$dir"
  return $rc
}
