# bench/gpu/rounds.sh — sourced by final.sh, evalc.sh, evalab.sh, evalsrc.sh and picks.sh: interleaved A/B rounds of the reference bench,
# and the builds they compare.
# ab_build DEST LOG LABEL: builds the native libraries (log in LOG) and copies them into DEST, a folder FOXHUNT_NATIVE_DIR
# can name as a variant; exits on a failed build.
# ab_native_check [OUT]: builds the check driver test/gpu/native_check.cpp into OUT (default native/build/native_check);
# exits on a failed build.
# ab_rounds DIR ROUNDS "KEYS": the caller sets the arrays ab_label and ab_env (one entry per variant; ab_env[i] is the
# env assignments of variant i). Each round runs every variant once (`npm run bench -- --config reference --backend
# cuda --epochs 5 --warmup 2`, into DIR/ab-<i>-<round>.txt) and prints its KEYS lines (e.g. "epoch train eval");
# then each variant's median, min and max of every key over the rounds (the machine's spread between bench runs is
# ~1-6 ms, so single runs do not decide). A variant that runs past the 60 s limit is left out of the later rounds.
ab_rounds() {
  local d=$1 rounds=$2 keys=$3 r i k t0 rc
  local -A hung=()
  for r in $(seq 1 "$rounds"); do
    for i in "${!ab_env[@]}"; do
      if [ -n "${hung[$i]:-}" ]; then continue; fi
      t0=$(date +%s)
      env ${ab_env[$i]} timeout 60 npm run -s bench -- --config reference --backend cuda --epochs 5 --warmup 2 \
        >"$d/ab-$i-$r.txt" 2>&1
      rc=$?
      echo "round $r ${ab_label[$i]} rc $rc ($(( $(date +%s)-t0 )) s): $(grep -E "^(${keys// /|}) ms " "$d/ab-$i-$r.txt" |
        tr -s ' ' | tr '\n' ';')"
      # a variant that ran past the limit (a hang) is left out of the later rounds
      if [ $rc = 124 ]; then hung[$i]=1; echo "  ${ab_label[$i]} ran past 60 s: left out of the later rounds"; fi
    done
  done
  for i in "${!ab_env[@]}"; do
    for k in $keys; do
      grep -hE "^$k ms +[0-9]" "$d"/ab-"$i"-*.txt | awk '{print $3}' | sort -n | awk -v n="${ab_label[$i]}" -v k="$k" \
        '{v[NR]=$1} END {if (NR) printf "%s: %s ms median %.2f (min %.2f, max %.2f, %d runs)\n", n, k, (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2), v[1], v[NR], NR}'
    done
  done
}

ab_build() {
  local dest=$1 log=$2 label=$3 t0
  t0=$(date +%s)
  FOXHUNT_BUILD_JOBS=$(nproc) node scripts/build-native.mjs --require-cuda > "$log" 2>&1 || { tail -30 "$log"; exit 1; }
  mkdir -p "$dest" && cp native/build/libfoxhunt_cpu.so native/build/libfoxhunt_cuda.so "$dest"/
  echo "build $label: $(( $(date +%s)-t0 )) s"
}

ab_native_check() {
  g++ -O2 -std=c++17 -Inative/include test/gpu/native_check.cpp -ldl -o "${1:-native/build/native_check}" || exit 1
}
