#!/usr/bin/env bash
# Makes a small CA and the certificates of a test cluster with openssl (docs/tls.md):
#   ca.crt / ca.key            the cluster's CA (EC P-256, 30 days)
#   server.crt / server.key    for listeners: SAN DNS:localhost, IP:127.0.0.1 (+ any extra names)
#   server2.crt / server2.key  another one like it (a renewal: tests of certificate reload)
#   client.crt / client.key    for clients under mutual TLS (gateway, dais ctl, tests)
#   expired.crt / .key         a server certificate valid only in 2020 (tests of refusals)
#   future.crt / .key          one not valid before 2099
#   other-ca.crt / other.crt / other.key   a second CA and a client certificate it signed
# usage: scripts/make_certs.sh DIR [EXTRA_SAN ...]   (EXTRA_SAN like DNS:node1 or IP:10.0.0.5)
set -euo pipefail
dir=$1
shift
mkdir -p "$dir"
cd "$dir"
san="DNS:localhost,IP:127.0.0.1"
for extra in "$@"; do san="$san,$extra"; done

cat > ca.cnf <<CNF
[ca]
default_ca = d
[d]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = p
copy_extensions = copy
unique_subject = no
[p]
commonName = supplied
CNF

new_ca() {  # name
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" \
    -out "$1.crt" -days 30 -subj "/CN=dais test $1" 2>/dev/null
}

# leaf NAME CA EXTENSIONS STARTDATE ENDDATE
leaf() {
  : > index.txt
  [[ -f serial ]] || echo 1000 > serial
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" \
    -out "$1.csr" -subj "/CN=$1" -addext "$3" 2>/dev/null
  openssl ca -batch -config ca.cnf -cert "$2.crt" -keyfile "$2.key" -in "$1.csr" -out "$1.crt" \
    -startdate "$4" -enddate "$5" -notext 2>/dev/null
  rm -f "$1.csr" ./*.pem
}

now=$(date -u -d '-1 hour' +%Y%m%d%H%M%SZ)
later=$(date -u -d '+30 days' +%Y%m%d%H%M%SZ)
new_ca ca
new_ca other-ca
leaf server ca "subjectAltName=$san" "$now" "$later"
leaf server2 ca "subjectAltName=$san" "$now" "$later"
leaf client ca "extendedKeyUsage=clientAuth" "$now" "$later"
leaf expired ca "subjectAltName=$san" 20200101000000Z 20200102000000Z
leaf future ca "subjectAltName=$san" 20990101000000Z 20991231000000Z
leaf other other-ca "extendedKeyUsage=clientAuth" "$now" "$later"
rm -f index.txt* serial* ca.cnf
chmod 600 ./*.key
echo "certificates in $PWD"
