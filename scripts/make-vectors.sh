#!/usr/bin/env bash
# Known-answer vectors for svc-webhooks, computed by an independent implementation (OpenSSL's
# HMAC-SHA256), never by the code under test (STYLE.md "Known answers that are not circular").
# Writes fixtures/vectors.json. Needs bash, printf, openssl, base64, iconv and jq; no Node.
#
#   bash scripts/make-vectors.sh
#
# Every signature is: { printf '%s' '<signed prefix>'; cat <body file>; } | openssl dgst -sha256 -hmac '<secret>'
# with prefix '<id>.<timestamp>.' for v2 and '<timestamp>.' for v1 (spec/service-api.md §6.2).
# Each vector records the exact command for its signatures in `openssl`.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$work/vectors.ndjson
: >"$out"

SECRET='svc_whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
OLD_SECRET='svc_whsec_Kx7cXkPq3v5N2oRlhZ0aYbWmE9tUgJdF'
LONG_SECRET="svc_whsec_$(printf 'LongSecret%.0s' $(seq 9))"
BLOCK_SECRET="svc_whsec_$(printf 'BlockSizeSecret-%.0s' $(seq 3))abcdef"
UTF8_SECRET='svc_whsec_clé-секрет-秘密'
ID='6f1c8f2a-3b4d-4e5f-9a0b-1c2d3e4f5a6b'
TS=1763806530

# hmac SECRET PREFIX FILE: lowercase hex HMAC-SHA256(SECRET, PREFIX || contents of FILE).
hmac() { { printf '%s' "$2"; cat "$3"; } | openssl dgst -sha256 -hmac "$1" -r | cut -d' ' -f1; }
command_for() { printf "{ printf '%%s' '%s'; cat body; } | openssl dgst -sha256 -hmac '%s'" "$2" "$1"; }
# flip_last_hex HEX: the same signature with its last hex digit changed.
flip_last_hex() { printf '%s%s' "${1:0:63}" "$(printf '%s' "${1:63:1}" | tr '0-9a-f' '1-9a-f0')"; }

# Defaults of one vector; each vector sets what differs, then calls `emit`.
reset() {
  name='' note='' body_file='' signed_file=''
  secrets_json="[\"$SECRET\"]" sign_secret=$SECRET
  id=$ID sign_id=$ID ts=$TS now=$TS allow_v1=false
  v2_header='auto' v1_header='auto' outcome=''
}

# emit: signs `signed_file` (default: the body) with openssl and appends the vector.
emit() {
  signed_file=${signed_file:-$body_file}
  local v2 v1 v2h v1h body_json='null'
  v2=$(hmac "$sign_secret" "$sign_id.$ts." "$signed_file")
  v1=$(hmac "$sign_secret" "$ts." "$signed_file")
  v2h=${v2_header/auto/v2=$v2}
  v1h=${v1_header/auto/v1=$v1}
  if iconv -f UTF-8 -t UTF-8 "$body_file" >/dev/null 2>&1; then body_json=$(jq -Rs . <"$body_file"); fi
  jq -cn \
    --arg name "$name" --arg note "$note" --argjson secrets "$secrets_json" \
    --arg id "$id" --argjson timestamp "$ts" --argjson now "$now" --argjson allowV1 "$allow_v1" \
    --argjson body "$body_json" --arg bodyBase64 "$(base64 -w0 <"$body_file")" \
    --arg v2h "$v2h" --arg v1h "$v1h" \
    --arg signSecret "$sign_secret" --arg signId "$sign_id" --arg signedBase64 "$(base64 -w0 <"$signed_file")" \
    --arg v2 "$v2" --arg v1 "$v1" \
    --arg v2cmd "$(command_for "$sign_secret" "$sign_id.$ts.")" --arg v1cmd "$(command_for "$sign_secret" "$ts.")" \
    --argjson outcome "$outcome" \
    '{
      name: $name, note: $note, secrets: $secrets, id: $id, timestamp: $timestamp, now: $now, allowV1: $allowV1,
      body: $body, bodyBase64: $bodyBase64,
      headers: ({ "svc-webhook-id": $id, "svc-webhook-timestamp": ($timestamp | tostring) }
        + (if $v2h == "" then {} else { "svc-webhook-signature-v2": $v2h } end)
        + (if $v1h == "" then {} else { "svc-webhook-signature": $v1h } end)),
      signed: { secret: $signSecret, id: $signId, timestamp: $timestamp, bodyBase64: $signedBase64 },
      expected: { v2: $v2, v1: $v1 },
      openssl: { v2: $v2cmd, v1: $v1cmd },
      outcome: $outcome
    }' >>"$out"
}

ok_v2='{"ok":true,"signatureVersion":"v2","secretIndex":0}'
refused() { printf '{"ok":false,"code":"%s"}' "$1"; }

# Bodies. The service serializes with sorted keys and no whitespace (spec §6.1).
compact=$work/compact.json
printf '%s' '{"business_id":"3f0c2a4e-8b1d-4c6a-9e2f-5a7b8c9d0e1f","conversation_id":"9b2e4f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b","event":"message.received","message":{"chat_id":"9b2e4f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b","created_at":"2026-11-22T10:15:30.123456+00:00","from":"+34600000000","id":"c4d5e6f7-a8b9-4c0d-9e1f-2a3b4c5d6e7f","sender_type":"customer","text":"Hello, a table for two at 20:00?"}}' >"$compact"
utf8=$work/utf8.json
printf '%s' '{"business_id":"3f0c2a4e-8b1d-4c6a-9e2f-5a7b8c9d0e1f","conversation_id":"9b2e4f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b","event":"message.received","message":{"chat_id":"9b2e4f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b","created_at":"2026-11-22T10:15:30.123456+00:00","from":"+34600000000","id":"c4d5e6f7-a8b9-4c0d-9e1f-2a3b4c5d6e7f","sender_type":"customer","text":"¿Mesa para dos? Crème brûlée 🍝 — 予約できますか"}}' >"$utf8"
escapes=$work/escapes.json
printf '%s' '{"business_id":"3f0c2a4e-8b1d-4c6a-9e2f-5a7b8c9d0e1f","conversation_id":"9b2e4f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b","event":"message.received","message":{"chat_id":"9b2e4f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b","created_at":"2026-11-22T10:15:30.123456+00:00","from":"+34600000000","id":"c4d5e6f7-a8b9-4c0d-9e1f-2a3b4c5d6e7f","sender_type":"customer","text":"Cr\u00e8me br\u00fbl\u00e9e \ud83c\udf5d \u4e88\u7d04 \"quoted\" \\ \/"}}' >"$escapes"
pretty=$work/pretty.json
printf '%s\n' '{' '  "event": "message.received",' '  "message": {' '    "text": "pretty printed, keys not sorted",' '    "id": "c4d5e6f7-a8b9-4c0d-9e1f-2a3b4c5d6e7f",' '    "chat_id": "9b2e4f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b",' '    "from": "+34600000000",' '    "sender_type": "customer",' '    "created_at": "2026-11-22T10:15:30.123456+00:00"' '  },' '  "business_id": "3f0c2a4e-8b1d-4c6a-9e2f-5a7b8c9d0e1f",' '  "conversation_id": "9b2e4f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b"' >"$pretty"
printf '%s' '}' >>"$pretty"
newline=$work/newline.json
{ cat "$compact"; printf '\n'; } >"$newline"
# One flipped bit: "Hello" -> "Iello" ('H' 0x48 xor 0x01 = 'I' 0x49).
flipped=$work/flipped.json
sed 's/"Hello/"Iello/' "$compact" | tr -d '\n' >"$flipped"
not_json=$work/not-json.txt
printf '%s' 'event=message.received&text=hello' >"$not_json"
large=$work/large.json
# 47 KiB: above the size where the node:crypto build stops copying the body next to the key pad.
{ printf '%s' '{"event":"message.received","message":{"text":"'; printf 'A long message, repeated to make a large body. %.0s' $(seq 1024); printf '%s' '"}}'; } >"$large"
bad_utf8=$work/bad-utf8.bin
printf '{"event":"message.received","text":"\xff\xfe"}' >"$bad_utf8"

reset; name='v2-compact-message-received'; note='The service serialization: sorted keys, no whitespace; both signature headers.'
body_file=$compact; outcome=$ok_v2; emit

reset; name='v2-raw-utf8'; note='Raw UTF-8 non-ASCII text (accents, emoji, CJK) signed as bytes.'
body_file=$utf8; outcome=$ok_v2; emit

reset; name='v2-unicode-escapes'; note='`\u` escapes in the JSON text (incl. a surrogate pair): the escaped bytes are signed, not the decoded values.'
body_file=$escapes; outcome=$ok_v2; emit

reset; name='v2-pretty-printed'; note='Pretty-printed body with unsorted keys: whitespace and key order are part of the signed bytes.'
body_file=$pretty; outcome=$ok_v2; emit

reset; name='v2-trailing-newline'; note='A body ending in `\n`: the newline is signed.'
body_file=$newline; outcome=$ok_v2; emit

reset; name='v1-only-allowed'; note='Only the legacy v1 header, allowV1 on: verified by v1 (`timestamp.body`).'
body_file=$compact; v2_header=''; allow_v1=true; outcome='{"ok":true,"signatureVersion":"v1","secretIndex":0}'; emit

reset; name='v1-only-refused-by-default'; note='Only the legacy v1 header and allowV1 off (the default).'
body_file=$compact; v2_header=''; outcome=$(refused v1_not_allowed); emit

reset; name='v1-does-not-cover-id'; note='v1 signed for another delivery id still verifies: v1 does not cover the id (why v1 is never deduplicated).'
body_file=$compact; sign_id='00000000-0000-4000-8000-000000000000'; v2_header=''; allow_v1=true
outcome='{"ok":true,"signatureVersion":"v1","secretIndex":0}'; emit

reset; name='v2-rotated-secrets'; note='Two secrets configured (old, new); the delivery is signed with the second.'
body_file=$compact; secrets_json="[\"$OLD_SECRET\",\"$SECRET\"]"; outcome='{"ok":true,"signatureVersion":"v2","secretIndex":1}'; emit

other_v2=$(hmac "$OLD_SECRET" "$ID.$TS." "$compact")
reset; name='v2-several-values-space'; note='Header `v2=<other> v2=<match>`: space separated, any one may match.'
body_file=$compact; v2_header="v2=$other_v2 auto"; outcome=$ok_v2; emit

reset; name='v2-several-values-comma'; note='Header `v2=<other>,v2=<match>`: comma separated, any one may match.'
body_file=$compact; v2_header="v2=$other_v2,auto"; outcome=$ok_v2; emit

reset; name='v2-several-values-comma-space'; note='Header `v2=<other>, v2=<match>`: comma and space.'
body_file=$compact; v2_header="v2=$other_v2, auto"; outcome=$ok_v2; emit

reset; name='v2-max-tolerance'; note='Timestamp exactly 300 s old: still inside the window.'
body_file=$compact; now=$((TS + 300)); outcome=$ok_v2; emit

reset; name='v2-large-body'; note='A 47 KiB body: HMAC implementations often stream large inputs another way than small ones.'
body_file=$large; outcome=$ok_v2; emit

reset; name='v2-secret-longer-than-block'; note='A 100-byte secret: longer than SHA-256'"'"'s 64-byte block, so HMAC hashes the key first (RFC 2104).'
body_file=$compact; secrets_json="[\"$LONG_SECRET\"]"; sign_secret=$LONG_SECRET; outcome=$ok_v2; emit

reset; name='v2-secret-of-block-size'; note='A secret of exactly 64 bytes: used as the key as is, no padding.'
body_file=$compact; secrets_json="[\"$BLOCK_SECRET\"]"; sign_secret=$BLOCK_SECRET; outcome=$ok_v2; emit

reset; name='v2-non-ascii-secret'; note='A secret with non-ASCII characters: the key is its UTF-8 bytes.'
body_file=$compact; secrets_json="[\"$UTF8_SECRET\"]"; sign_secret=$UTF8_SECRET; outcome=$ok_v2; emit

reset; name='v2-uppercase-hex'; note='The v2 value in uppercase hex: the service sends lowercase, the same digits in uppercase are the same value.'
body_file=$compact; v2_header="v2=$(hmac "$SECRET" "$ID.$TS." "$compact" | tr 'a-f' 'A-F')"; outcome=$ok_v2; emit

reset; name='wrong-secret'; note='Signed with another secret than the one configured.'
body_file=$compact; sign_secret=$OLD_SECRET; outcome=$(refused invalid_signature); emit

reset; name='flipped-body-byte'; note='Signature of the original body; one bit of one body byte flipped in transit.'
body_file=$flipped; signed_file=$compact; outcome=$(refused invalid_signature); emit

reset; name='flipped-signature-digit'; note='Last hex digit of the v2 signature changed.'
body_file=$compact; v2_header="v2=$(flip_last_hex "$(hmac "$SECRET" "$ID.$TS." "$compact")")"; outcome=$(refused invalid_signature); emit

reset; name='v2-id-changed'; note='v2 signed for another delivery id: v2 covers the id.'
body_file=$compact; sign_id='00000000-0000-4000-8000-000000000000'; outcome=$(refused invalid_signature); emit

reset; name='v2-wrong-v1-right'; note='A wrong v2 next to a valid v1, allowV1 on: v2 wins, no fallback to the weaker scheme.'
body_file=$compact; allow_v1=true; v2_header="v2=$other_v2"; outcome=$(refused invalid_signature); emit

reset; name='timestamp-too-old'; note='Valid signature, timestamp 301 s in the past.'
body_file=$compact; now=$((TS + 301)); outcome=$(refused timestamp_too_old); emit

reset; name='timestamp-in-future'; note='Valid signature, timestamp 301 s in the future.'
body_file=$compact; now=$((TS - 301)); outcome=$(refused timestamp_in_future); emit

reset; name='signed-not-json'; note='A correctly signed body that is not JSON.'
body_file=$not_json; outcome=$(refused invalid_json); emit

reset; name='signed-invalid-utf8'; note='A correctly signed body with bytes that are not UTF-8 (0xff 0xfe): exact only as base64.'
body_file=$bad_utf8; outcome=$(refused invalid_json); emit

mkdir -p fixtures
jq -s '{
  "$comment": "Generated by scripts/make-vectors.sh with OpenSSL HMAC-SHA256; do not edit by hand. bodyBase64 is authoritative (body is its UTF-8 text, null when not UTF-8). now is Unix seconds for the injected clock.",
  vectors: .
}' "$out" >fixtures/vectors.json
echo "wrote fixtures/vectors.json ($(jq '.vectors | length' fixtures/vectors.json) vectors, $(openssl version))"
