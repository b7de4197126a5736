#!/bin/sh
# Makes a TEST certificate authority and one certificate per member, for clusters whose members run on several
# hosts with TLS (cluster/README.md, "Several hosts"). Not for production: keys are unencrypted, valid 30 days.
#
#   scripts/make-test-ca.sh DIR ID=HOST[,HOST...] ...
#   scripts/make-test-ca.sh certs n1=10.0.0.1 n2=10.0.0.2,node2.example n3=10.0.0.3
#
# writes DIR/ca.pem and DIR/ca.key (the CA: kept and reused when DIR already has them, so a member added later
# gets a certificate from the same CA) and DIR/ID.pem, DIR/ID.key for each member. Each member certificate names
# the member id as its Common Name and as a DNS subject alternative name (the Raft transport checks the CN), and
# carries each HOST as an IP or DNS alternative name (HTTPS clients check the address they dialled). Give the
# host addresses other processes use to reach it: its --advertise-http host. Keys are EC P-256; every
# certificate may serve and dial (serverAuth and clientAuth: Raft TLS is mutual).
set -eu

usage() {
  echo "usage: $0 DIR ID=HOST[,HOST...] [ID=HOST...]" >&2
  exit 2
}
[ $# -ge 2 ] || usage
dir=$1
shift
days=${CERT_DAYS:-30}
command -v openssl >/dev/null || { echo "$0: openssl is not installed" >&2; exit 2; }
mkdir -p "$dir"
umask 077

if [ ! -f "$dir/ca.pem" ] || [ ! -f "$dir/ca.key" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" -days "$days" \
    -subj "/CN=raftkit test CA $(date -u +%Y%m%dT%H%M%S)-$$" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  echo "made $dir/ca.pem"
fi

for spec in "$@"; do
  id=${spec%%=*}
  hosts=${spec#*=}
  case $id in '' | *[!A-Za-z0-9._-]*) echo "$0: bad member id in $spec (letters, digits, . _ -)" >&2; exit 2 ;; esac
  [ "$hosts" != "$spec" ] || { echo "$0: $spec: expected ID=HOST[,HOST...]" >&2; exit 2; }
  san="DNS:$id"
  old_ifs=$IFS
  IFS=,
  for h in $hosts; do
    [ -n "$h" ] || continue
    # An IPv4 or IPv6 literal is an IP name; anything else a DNS name.
    if printf '%s' "$h" | grep -Eq '^[0-9.]+$|:'; then san="$san,IP:$h"; else san="$san,DNS:$h"; fi
  done
  IFS=$old_ifs
  ext=$(mktemp)
  printf 'subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$ext"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/$id.key" -out "$dir/$id.csr" -subj "/CN=$id" 2>/dev/null
  openssl x509 -req -in "$dir/$id.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -out "$dir/$id.pem" -days "$days" -extfile "$ext" 2>/dev/null
  rm -f "$ext" "$dir/$id.csr"
  echo "made $dir/$id.pem ($san)"
done
