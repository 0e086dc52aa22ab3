#!/usr/bin/env bash
# Makes a CA and a serving certificate for the webhook's Service with openssl, and, with --apply,
# stores them in the cluster: the Secret gpuprio-webhook-tls (tls.crt, tls.key) in the namespace,
# and the CA as caBundle of the MutatingWebhookConfiguration gpuprio-webhook. The alternative to
# this script is cert-manager (docs/kubernetes.md, "TLS").
#
#   gen_certs.sh --out DIR [--service gpuprio-webhook] [--namespace gpuprio] [--days 825]
#                [--extra-san DNS:name|IP:addr]... [--apply]
#
# Writes DIR/ca.key, DIR/ca.crt, DIR/tls.key, DIR/tls.crt (keys mode 0600). The serving
# certificate names <service>, <service>.<namespace>, <service>.<namespace>.svc and
# <service>.<namespace>.svc.cluster.local (the API server calls <service>.<namespace>.svc).
# Without --apply nothing but openssl runs (the tests use it so). Re-running makes a new CA: apply
# again, so the Secret and the caBundle change together.
set -euo pipefail

out=""
service="gpuprio-webhook"
namespace="gpuprio"
days=825
apply=0
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --service) service="${2:?}"; shift 2 ;;
    --namespace) namespace="${2:?}"; shift 2 ;;
    --days) days="${2:?}"; shift 2 ;;
    --extra-san) extra+=("${2:?}"); shift 2 ;;
    --apply) apply=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "gen_certs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || { echo "gen_certs.sh: --out DIR is needed" >&2; exit 2; }
command -v openssl >/dev/null || { echo "gen_certs.sh: openssl is not installed" >&2; exit 1; }
mkdir -p "$out"
umask 077

san="DNS:${service},DNS:${service}.${namespace},DNS:${service}.${namespace}.svc"
san="${san},DNS:${service}.${namespace}.svc.cluster.local"
for name in "${extra[@]}"; do san="${san},${name}"; done

openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" \
  -keyout "$out/ca.key" -out "$out/ca.crt" -subj "/CN=gpuprio-webhook-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  2>/dev/null
openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$out/tls.key" -out "$out/tls.csr" \
  -subj "/CN=${service}.${namespace}.svc" 2>/dev/null
cat > "$out/tls.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=${san}
EOF
openssl x509 -req -in "$out/tls.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
  -days "$days" -sha256 -extfile "$out/tls.ext" -out "$out/tls.crt" 2>/dev/null
rm -f "$out/tls.csr" "$out/tls.ext" "$out/ca.srl"
chmod 0644 "$out/ca.crt" "$out/tls.crt"
openssl verify -CAfile "$out/ca.crt" "$out/tls.crt" >/dev/null
echo "gen_certs.sh: $out/ca.crt, $out/tls.crt (for ${service}.${namespace}.svc), $out/tls.key"

if [[ "$apply" == 1 ]]; then
  command -v kubectl >/dev/null || { echo "gen_certs.sh: --apply needs kubectl" >&2; exit 1; }
  kubectl -n "$namespace" create secret tls gpuprio-webhook-tls \
    --cert="$out/tls.crt" --key="$out/tls.key" --dry-run=client -o yaml | kubectl apply -f -
  bundle="$(base64 < "$out/ca.crt" | tr -d '\n')"
  kubectl patch mutatingwebhookconfiguration gpuprio-webhook --type=json \
    -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"${bundle}\"}]"
  # The Deployment reads the files again when they change (within a minute or so of the kubelet
  # updating the Secret's volume); restart it to use them now.
  kubectl -n "$namespace" rollout restart deployment/gpuprio-webhook
  echo "gen_certs.sh: Secret gpuprio-webhook-tls and caBundle of gpuprio-webhook updated"
fi
