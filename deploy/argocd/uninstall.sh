#!/usr/bin/env bash
# Removes what deploy/argocd added to Argo CD, and nothing else:
#   - from the ConfigMap argocd-notifications-cm: service.webhook.herald, template.herald and every trigger.herald-on-*
#     key (also triggers of older kit versions), and the `subscriptions` key only when it holds Herald's subscription
#     alone; when it also holds yours, it is left as is and the script says what to remove by hand;
#   - from the Secret argocd-notifications-secret: the key herald-token.
# Every other key (other services, templates, triggers, `context`, your subscriptions) stays. Keys are removed with a
# JSON merge patch that sets them to null, which removes a key and ignores one that is already gone, so running the
# script twice is harmless.
#
# Usage: deploy/argocd/uninstall.sh [--dry-run] [-n NAMESPACE]
#   --dry-run     print the patches instead of applying them
#   -n NAMESPACE  where Argo CD runs (default: argocd)
#   KUBECTL       the kubectl command to run (default: kubectl), e.g. KUBECTL="kubectl --context prod"
set -euo pipefail

namespace=argocd
dry_run=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    -n | --namespace)
      [ $# -ge 2 ] || { echo "uninstall.sh: $1 needs a namespace" >&2; exit 2; }
      namespace="$2"
      shift
      ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "uninstall.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
# Word splitting on purpose: KUBECTL may carry flags.
read -r -a kubectl <<<"${KUBECTL:-kubectl}"
configmap=argocd-notifications-cm
secret=argocd-notifications-secret

data_keys() { # kind name -> the keys of .data (and .stringData never: the API server folds it into .data)
  # shellcheck disable=SC2016 # a Go template, not shell
  "${kubectl[@]}" -n "$namespace" get "$1" "$2" -o go-template='{{range $k, $v := .data}}{{$k}}{{"\n"}}{{end}}'
}

# True when a `subscriptions` value names no recipient but herald and no trigger but herald-on-*: then it is the one
# this kit installed, and removing the whole key removes nothing of the operator's.
only_herald_subscription() {
  awk '
    { sub(/#.*/, ""); gsub(/[[:space:]]+$/, "") }
    /^[[:space:]]*$/ { next }
    {
      line = $0
      sub(/^[[:space:]]*(-[[:space:]]+)?/, "", line)
      if (line ~ /^(recipients|triggers):$/) next
      if (line ~ /^(recipients|triggers):[[:space:]]*\[.*\]$/) {
        sub(/^[a-z]+:[[:space:]]*\[/, "", line); sub(/\]$/, "", line)
        n = split(line, items, ",")
        for (i = 1; i <= n; i++) {
          item = items[i]; gsub(/^[[:space:]"'\'']+|[[:space:]"'\'']+$/, "", item)
          if (item != "herald" && item !~ /^herald-on-[a-z0-9-]+$/) bad = 1
        }
        next
      }
      gsub(/^["'\'']|["'\'']$/, "", line)
      if (line != "herald" && line !~ /^herald-on-[a-z0-9-]+$/) bad = 1
    }
    END { exit bad }
  '
}

# A JSON merge patch that removes the given data keys (names of the form [A-Za-z0-9._-]+, nothing to escape).
removal_patch() {
  local first=1 key
  printf '{"data": {'
  for key in "$@"; do
    [ $first -eq 1 ] || printf ', '
    printf '"%s": null' "$key"
    first=0
  done
  printf '}}'
}

apply_patch() { # kind name patch
  if [ $dry_run -eq 1 ]; then
    echo "would patch $1/$2 in namespace $namespace: $3"
  else
    "${kubectl[@]}" -n "$namespace" patch "$1" "$2" --type merge -p "$3" >/dev/null
    echo "patched $1/$2 in namespace $namespace"
  fi
}

mapfile -t remove < <(data_keys configmap "$configmap" | grep -E '^(service\.webhook\.herald|template\.herald|trigger\.herald-on-[A-Za-z0-9-]+)$' || true)
subscriptions="$("${kubectl[@]}" -n "$namespace" get configmap "$configmap" \
  -o go-template='{{with .data}}{{with index . "subscriptions"}}{{.}}{{end}}{{end}}')"
kept_subscriptions=0
if [ -n "$subscriptions" ]; then
  if only_herald_subscription <<<"$subscriptions"; then
    remove+=(subscriptions)
  elif grep -Eq '(^|[^a-z0-9-])herald($|[^a-z0-9-])|herald-on-' <<<"$subscriptions"; then
    kept_subscriptions=1
  fi
fi

if [ ${#remove[@]} -gt 0 ]; then
  apply_patch configmap "$configmap" "$(removal_patch "${remove[@]}")"
else
  echo "configmap/$configmap in namespace $namespace has no Herald keys"
fi

if "${kubectl[@]}" -n "$namespace" get secret "$secret" >/dev/null 2>&1; then
  # Read the keys first: `kubectl … | grep -q` can fail under pipefail when grep stops reading early.
  secret_keys="$(data_keys secret "$secret")"
  if grep -qx 'herald-token' <<<"$secret_keys"; then
    apply_patch secret "$secret" "$(removal_patch herald-token)"
  fi
fi

if [ $kept_subscriptions -eq 1 ]; then
  cat >&2 <<EOF
The key 'subscriptions' of configmap/$configmap holds your subscriptions as well as Herald's, so it was left as is.
Remove Herald's entry (recipient 'herald', triggers herald-on-*) by hand:
  ${KUBECTL:-kubectl} -n $namespace edit configmap $configmap
Until then Argo CD logs that the subscribed herald-on-* triggers are not configured; nothing is sent.
EOF
fi
