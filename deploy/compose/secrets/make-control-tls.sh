#!/bin/sh
# Makes the control API's certificate for the Compose stack, in the current directory:
#
#   control-ca.pem   a CA of its own, which the gateways trust (the CA's key is deleted:
#                    nothing signs with it again; run this again for a new pair)
#   control.pem      the controllers' certificate, naming controller-1 and controller-2
#   control.key      its key
#
# Run it once before the first `docker compose up`, and again to replace them:
#
#   cd deploy/compose/secrets && sh make-control-tls.sh
#
# Any tool that makes the same three files will do; this one uses openssl (3.0 or later).
# The files are left readable by every user, as the other files here: Compose mounts them
# as they are, and the containers run as uid 10001.
set -eu

ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
# shellcheck disable=SC2086 # $ec is several arguments
openssl req -x509 $ec -days 3650 -subj /CN=proxypool-compose-control-ca \
  -keyout control-ca.key -out control-ca.pem
# shellcheck disable=SC2086
openssl req -x509 $ec -days 825 -subj /CN=proxypool-controller \
  -addext subjectAltName=DNS:controller-1,DNS:controller-2 \
  -addext basicConstraints=critical,CA:FALSE \
  -addext keyUsage=critical,digitalSignature \
  -addext extendedKeyUsage=serverAuth \
  -CA control-ca.pem -CAkey control-ca.key -keyout control.key -out control.pem
rm -f control-ca.key
chmod 0644 control-ca.pem control.pem control.key
echo "made control-ca.pem, control.pem and control.key in $(pwd)"
