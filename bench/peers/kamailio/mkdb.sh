#!/bin/bash
# Creates a SQLite subscriber DB with user0000..user0999 (password pw0000..pw0999, realm bench.local)
# and the SIPp injection CSV. Usage: kamailio/mkdb.sh [outdir]
set -euo pipefail
OUT=${1:-/tmp/peers}
REALM=bench.local
mkdir -p "$OUT"
DB=$OUT/kamailio.sqlite
rm -f "$DB"
S=/usr/share/kamailio/db_sqlite
cat "$S/standard-create.sql" "$S/auth_db-create.sql" | sqlite3 "$DB"
{
  echo "BEGIN;"
  for i in $(seq 0 999); do
    u=$(printf 'user%04d' "$i"); p=$(printf 'pw%04d' "$i")
    ha1=$(printf '%s' "$u:$REALM:$p" | md5sum | cut -d' ' -f1)
    ha1b=$(printf '%s' "$u@$REALM:$REALM:$p" | md5sum | cut -d' ' -f1)
    echo "INSERT INTO subscriber(username,domain,password,ha1,ha1b) VALUES('$u','$REALM','$p','$ha1','$ha1b');"
  done
  echo "COMMIT;"
} | sqlite3 "$DB"
chmod 644 "$DB"; chmod 755 "$OUT"
{ echo "SEQUENTIAL"; for i in $(seq 0 999); do printf 'user%04d;[authentication username=user%04d password=pw%04d]\n' "$i" "$i" "$i"; done; } > "$OUT/users.csv"
echo "db: $DB ($(sqlite3 "$DB" 'select count(*) from subscriber') subscribers); csv: $OUT/users.csv"
