# Shared by the scripts that run a helper process in the background (sourced, not run).

# Whether process PID runs (not a zombie).
alive() {
  local state
  state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null || true)
  [ -n "$state" ] && [ "$state" != Z ]
}

# Stops process PID: SIGTERM, up to 10 s for it to end, then SIGKILL. Returns once it is gone
# or killed.
terminate() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    alive "$pid" || return 0
    [ "$i" -eq 100 ] || sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}
