#!/usr/bin/env bash
# run_server.sh — flux-server end to end on the tiny golden model: real
# clients (curl, an AUTOMATIC1111-style JSON client in python3, the official
# OpenAI Node SDK when npm can fetch it), byte equality with the flux CLI,
# and the faults (malformed JSON, oversized body, a client that goes away,
# a full queue, SIGTERM mid-queue, a missing API key), the hostile clients
# of issue 32 (idle and dripping sockets, huge JSON arrays, an endless
# chunked body: tests/server_attacks.py; other sites' pages by Origin and
# Host; broken LoRAs), the web page in headless Chromium (1280 and 390 px
# wide; SERVER_SHOTS=DIR keeps its screenshots), two servers behind nginx
# configured by the README's own example, and a bounded load test
# (LOAD_REQUESTS from LOAD_CLIENTS clients, default 200 from 16, with hostile
# clients from 127.0.0.2 meanwhile).
#
# Builds `make server` first (the variant of the calling make: make
# SANITIZE=1 test runs the sanitized server). Without libmicrohttpd or curl:
# every check is reported as skipped (as failed under CI=true).
# Ends with "N passed, N failed, N skipped" like the other suites.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
MODEL=$ROOT/tests/golden/model
N_CHECKS=204 # the checks below, reported as skipped when the suite cannot run

skip_all() {
    echo "server: $1: $N_CHECKS checks not run"
    if [ "${CI:-}" = "true" ]; then echo "0 passed, $N_CHECKS failed, 0 skipped"; exit 1; fi
    echo "0 passed, 0 failed, $N_CHECKS skipped"; exit 0
}
command -v curl >/dev/null || skip_all "curl not installed (tools/install_deps.sh --server)"
command -v python3 >/dev/null || skip_all "python3 not installed (tools/install_deps.sh --server)"
if ! pkg-config --exists libmicrohttpd 2>/dev/null && [ ! -f /usr/include/microhttpd.h ]; then
    skip_all "libmicrohttpd-dev not installed (tools/install_deps.sh --server)"
fi
MAKE=${MAKE:-make}
if ! $MAKE -s -j2 server >/tmp/flux-server-build.$$ 2>&1; then
    cat /tmp/flux-server-build.$$
    rm -f /tmp/flux-server-build.$$
    echo "server: make server failed"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
rm -f /tmp/flux-server-build.$$
SERVER=${FLUX_SERVER:-$ROOT/flux-server}
FLUX=${FLUX_BIN:-$ROOT/flux}
TOOLS=${FLUX_TOOLS:-$ROOT/build/cc/tools}

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT

passed=0 failed=0 skipped=0
ok() { echo "  ok   $1"; passed=$((passed + 1)); }
bad() { echo "  FAIL $1${2:+: $2}"; failed=$((failed + 1)); }
skip() { echo "  skip $1${2:+: $2}"; skipped=$((skipped + 1)); }
# wait until server on port $1 reports $2 running jobs and $3 queued (60 s)
wait_state() {
    for _ in $(seq 1 600); do
        m=$(curl -s "http://127.0.0.1:$1/metrics")
        [ "$(echo "$m" | sed -n 's/^flux_job_running //p')" = "$2" ] &&
            [ "$(echo "$m" | sed -n 's/^flux_queue_length //p')" = "$3" ] && return 0
        sleep 0.1
    done
    echo "  (wait_state $1 $2 $3 timed out at ${SECONDS}s: $(echo "$m" | grep -E '^flux_(job_running|queue_length) ' | tr '\n' ' '))"
    return 1
}
check() { # name, command...
    local name=$1; shift
    if "$@"; then ok "$name"; else bad "$name"; fi
}
runs() { # name, log file, command...: the command succeeds (else the end of its log is shown)
    local name=$1 log=$2; shift 2
    if "$@" >"$log" 2>&1; then ok "$name"; else bad "$name" "$(tail -5 "$log")"; fi
}
not_run() { # reason, names...: checks that could not run (skipped; failed under CI=true)
    local why=$1 n; shift
    for n in "$@"; do
        if [ "${CI:-}" = "true" ]; then bad "$n" "$why"; else skip "$n" "$why"; fi
    done
}

# page_once WHAT NAME URL MODE WANT: the page (page.mjs, written by the page section) makes one image
# in MODE (quick, lora, base); it must be the bytes of the file WANT
page_once() {
    if [ -d "$NODE_DIR/node_modules/playwright-core" ] && [ -n "${CHROMIUM:-}" ]; then
        runs "$1: ran" "$TMP/$2.out" node "$NODE_DIR/page.mjs" "$3" "$CHROMIUM" "$TMP/$2" "$4"
        check "$1: the image = $(basename "$5")'s bytes" cmp -s "$TMP/$2.png" "$5"
    else
        not_run "chromium or npm playwright-core missing" "$1: ran" "$1: image"
    fi
}

# start_server NAME ARGS...: runs flux-server on a free port; sets PORT and PID
start_server() {
    local name=$1; shift
    "$SERVER" -d "$MODEL" --port 0 "$@" >"$TMP/$name.log" 2>&1 &
    PID=$!
    PIDS+=("$PID")
    PORT=
    for _ in $(seq 1 600); do # the model loads in well under a second; sanitized builds are slower
        PORT=$(sed -n 's/.*listening on http:\/\/[^ ]*:\([0-9][0-9]*\).*/\1/p' "$TMP/$name.log")
        [ -n "$PORT" ] && return 0
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "server: $name did not start:"; cat "$TMP/$name.log"
    return 1
}

# status CODE of a request: http_code METHOD PATH [curl args...]
# (a -d / --data-binary body is sent as application/json unless a Content-Type is given)
http_code() {
    local method=$1 path=$2 a json=()
    shift 2
    for a in "$@"; do case $a in -d|--data-binary) json=(-H 'Content-Type: application/json') ;; esac; done
    for a in "$@"; do case $a in Content-Type:*|content-type:*) json=() ;; esac; done
    curl -s -o "$TMP/body" -w '%{http_code}' -X "$method" "http://127.0.0.1:$PORT$path" "${json[@]}" "$@"
}
JSON=(-H 'Content-Type: application/json')
json_get() { # FILE EXPR (python on the parsed JSON as d)
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null
}
b64_to() { # JSON FILE, python expression of the base64 text, OUT
    python3 -c "import json,sys,base64; d=json.load(open(sys.argv[1])); open(sys.argv[2],'wb').write(base64.b64decode($2))" "$1" "$3"
}
is_json_error() { # the last body is {"error": {"message": ...}} with the status
    [ "$(json_get "$TMP/body" "d['error']['code']")" = "$1" ]
}

echo "server: $SERVER on $MODEL"
# the CLI's images the server must reproduce byte for byte
"$FLUX" -q -d "$MODEL" -p 'a red apple' -W 64 -H 64 -s 2 -S 40 -o "$TMP/cli.png" || { echo "flux CLI failed"; exit 1; }
"$FLUX" -q -d "$MODEL" -p 'a red apple' -W 64 -H 64 -s 2 -S 40 -n 2 -o "$TMP/cli2.png"
"$FLUX" -q -d "$MODEL" -p 'make it blue' -W 64 -H 64 -s 2 -S 7 -i "$TMP/cli.png" -o "$TMP/cli-edit.png"
# img2img / inpainting twins (issue 31): the server writes the request's field as the PNG's init_image text
# and "mask" as its mask text, so the CLI runs on files of those names
FIX=$ROOT/tests/server # tools/gen_server_fixtures.py (Pillow): masks, a Pillow-resized init image
mkdir -p "$TMP/twin"
for n in 'init_images[0]' 'image[0]' init_image; do cp "$TMP/cli.png" "$TMP/twin/$n"; done
cp "$FIX/mask-64.png" "$TMP/twin/mask"
twin() { # OUT, flux arguments...: the CLI in the twin folder, prompt 'make it blue', 2 steps, seed 7
    local out=$1; shift
    (cd "$TMP/twin" && "$FLUX" -q -d "$MODEL" -p 'make it blue' -s 2 -S 7 "$@" -o "$out")
}
twin "$TMP/cli-i2i.png" --init-img 'init_images[0]' --strength 0.75
twin "$TMP/cli-inpaint-a1111.png" --init-img 'init_images[0]' --strength 0.75 --mask mask --mask-invert --mask-blur 4
twin "$TMP/cli-inpaint-openai.png" --init-img 'image[0]' --strength 1 --mask mask
twin "$TMP/cli-inpaint-openai-05.png" --init-img 'image[0]' --strength 0.5 --mask mask -i "$TMP/cli.png"
twin "$TMP/cli-inpaint-native.png" --init-img init_image --strength 0.6 --mask mask --mask-invert --mask-blur 2.5
twin "$TMP/cli-i2i-native.png" --init-img init_image --strength 0.8
mkdir -p "$TMP/twin-resized" && cp "$FIX/init-100x75-64x64.png" "$TMP/twin-resized/init_images[0]"
(cd "$TMP/twin-resized" && "$FLUX" -q -d "$MODEL" -p 'make it blue' -s 2 -S 7 --init-img 'init_images[0]' --strength 0.75 -o "$TMP/cli-i2i-resized.png")

start_server main --max-queue 1 -t 2 || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
MAIN_PID=$PID MAIN_PORT=$PORT

echo "== operations and discovery (${SECONDS} s)"
check "/health 200" [ "$(http_code GET /health)" = 200 ]
check "/ready 200 when idle" [ "$(http_code GET /ready)" = 200 ]
check "/v1/models names the model" [ "$(http_code GET /v1/models)" = 200 -a "$(json_get "$TMP/body" "d['data'][0]['id']")" = model ]
check "/sdapi/v1/sd-models" [ "$(http_code GET /sdapi/v1/sd-models)" = 200 -a "$(json_get "$TMP/body" "d[0]['model_name']")" = model ]
check "/sdapi/v1/options GET" [ "$(http_code GET /sdapi/v1/options)" = 200 -a "$(json_get "$TMP/body" "d['sd_model_checkpoint']")" = model ]
check "/sdapi/v1/options POST of another model: 400" [ "$(http_code POST /sdapi/v1/options -d '{"sd_model_checkpoint":"other"}')" = 400 ]
check "/sdapi/v1/loras without --lora-dir: []" [ "$(http_code GET /sdapi/v1/loras)" = 200 -a "$(cat "$TMP/body")" = "[]" ]
check "A1111 lists: schedulers, upscalers, sd-vae, sd-modules, latent-upscale-modes" sh -c "
    for l in schedulers upscalers sd-vae sd-modules latent-upscale-modes; do
        curl -sf http://127.0.0.1:$PORT/sdapi/v1/\$l | python3 -c 'import json,sys; assert isinstance(json.load(sys.stdin), list)' || exit 1
    done"

echo "== OpenAI images API (curl) (${SECONDS} s)"
code=$(http_code POST /v1/images/generations -H 'Content-Type: application/json' \
    -d '{"model":"model","prompt":"a red apple","size":"64x64","steps":2,"seed":40,"response_format":"b64_json"}')
check "generations 200" [ "$code" = 200 ]
b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/openai.png"
check "generations: the CLI's PNG bytes (metadata included)" cmp -s "$TMP/openai.png" "$TMP/cli.png"
code=$(http_code POST /v1/images/generations -d '{"prompt":"a red apple","size":"64x64","steps":2,"seed":40,"n":2}')
b64_to "$TMP/body" "d['data'][1]['b64_json']" "$TMP/openai-1.png"
check "generations n=2: second image = CLI -n 2 out-1.png" cmp -s "$TMP/openai-1.png" "$TMP/cli2-1.png"
check "generations n=2: seeds 40, 41" [ "$(json_get "$TMP/body" "[x['seed'] for x in d['data']]")" = "[40, 41]" ]
code=$(http_code POST /v1/images/edits -F image=@"$TMP/cli.png" -F prompt='make it blue' -F size=64x64 -F steps=2 -F seed=7)
check "edits (multipart) 200" [ "$code" = 200 ]
b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/edit.png"
check "edits: the CLI's -i PNG bytes" cmp -s "$TMP/edit.png" "$TMP/cli-edit.png"
python3 -c 'import base64, json, sys; print(json.dumps({"prompt": "make it blue", "size": "64x64", "steps": 2, "seed": 7,
    "images": [{"image_url": "data:image/png;base64," + base64.b64encode(open(sys.argv[1], "rb").read()).decode()}]}))' \
    "$TMP/cli.png" >"$TMP/edit.json"
check "edits, JSON form images: [{image_url}]: 200" [ "$(http_code POST /v1/images/edits --data-binary @"$TMP/edit.json")" = 200 ]
b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/edit-json.png"
check "edits (JSON): the CLI's -i PNG bytes" cmp -s "$TMP/edit-json.png" "$TMP/cli-edit.png"
check "edits without an image: 400" [ "$(http_code POST /v1/images/edits -F prompt=x -F size=64x64)" = 400 ]
check "response_format url: 400" [ "$(http_code POST /v1/images/generations -d '{"prompt":"x","response_format":"url"}')" = 400 ]

echo "== AUTOMATIC1111 API (python3 client) (${SECONDS} s)"
cat >"$TMP/a1111.py" <<'EOF'
# An A1111-style client: what SillyTavern / Open WebUI / scripts send.
import base64, json, sys, urllib.request
base, out, ref = sys.argv[1], sys.argv[2], sys.argv[3]
def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)
r = post("/sdapi/v1/txt2img", {"prompt": "a red apple", "negative_prompt": "", "seed": 40, "steps": 2, "cfg_scale": 7,
                                "width": 64, "height": 64, "batch_size": 2, "n_iter": 1, "sampler_name": "Euler",
                                "restore_faces": False, "override_settings": {}})
open(out + "-t2i.png", "wb").write(base64.b64decode(r["images"][0]))
info = json.loads(r["info"])
print("seeds", info["all_seeds"], "images", len(r["images"]), "cfg", info["cfg_scale"])
def b64(path):
    return base64.b64encode(open(path, "rb").read()).decode()
# img2img and inpainting as A1111 clients send them: every field, at its defaults where unused (issue 31)
img2img = {"prompt": "make it blue", "negative_prompt": "", "seed": 7, "steps": 2, "cfg_scale": 7, "width": 64,
           "height": 64, "batch_size": 1, "n_iter": 1, "sampler_name": "Euler", "denoising_strength": 0.75,
           "resize_mode": 0, "image_cfg_scale": 0, "mask_blur_x": 4, "mask_blur_y": 4, "mask_blur": 4,
           "mask_round": True, "inpainting_fill": 0, "inpaint_full_res": True, "inpaint_full_res_padding": 0,
           "inpainting_mask_invert": 0, "include_init_images": False, "override_settings": {},
           "init_images": ["data:image/png;base64," + b64(ref)]}
r = post("/sdapi/v1/img2img", img2img)
open(out + "-i2i.png", "wb").write(base64.b64decode(r["images"][0]))
r = post("/sdapi/v1/img2img", dict(img2img, mask=b64(sys.argv[4]), inpainting_fill=1, inpaint_full_res=False,
                                   inpainting_mask_invert=1))
open(out + "-inpaint.png", "wb").write(base64.b64decode(r["images"][0]))
print("inpaint infotext:", json.loads(r["info"])["infotexts"][0])
r = post("/sdapi/v1/img2img", dict(img2img, init_images=[b64(sys.argv[5])]))
open(out + "-resized.png", "wb").write(base64.b64decode(r["images"][0]))
with urllib.request.urlopen(base + "/sdapi/v1/progress") as p:
    print("progress", json.load(p)["state"]["job_count"])
EOF
runs "A1111 client ran" "$TMP/a1111.out" python3 "$TMP/a1111.py" "http://127.0.0.1:$PORT" "$TMP/a1111" "$TMP/cli.png" \
    "$FIX/mask-64.png" "$FIX/init-100x75.png"
check "txt2img: first image = the CLI's bytes (cfg_scale 7 ignored on a distilled model)" cmp -s "$TMP/a1111-t2i.png" "$TMP/cli.png"
check "txt2img: info seeds and count" grep -q "seeds \[40, 41\] images 2 cfg 1" "$TMP/a1111.out"
check "img2img (init_images data URL, denoising_strength 0.75) = the CLI's --init-img --strength 0.75 bytes" cmp -s "$TMP/a1111-i2i.png" "$TMP/cli-i2i.png"
check "img2img with mask, inpainting_mask_invert, mask_blur 4 = the CLI's --mask --mask-invert --mask-blur 4 bytes" cmp -s "$TMP/a1111-inpaint.png" "$TMP/cli-inpaint-a1111.png"
check "img2img: a 100x75 init image at width = height = 64 is Pillow's Lanczos resize of it (resize_mode 0)" cmp -s "$TMP/a1111-resized.png" "$TMP/cli-i2i-resized.png"
check "progress when idle: 0 jobs" grep -q "progress 0" "$TMP/a1111.out"

echo "== native jobs API (${SECONDS} s)"
curl -s -D "$TMP/headers" -o "$TMP/body" -X POST "http://127.0.0.1:$PORT/v1/jobs" "${JSON[@]}" \
    -d '{"prompt":"a red apple","width":64,"height":64,"steps":2,"seed":40}'
check "POST /v1/jobs: 202 with Location" grep -qi "^Location: /v1/jobs/job-" "$TMP/headers"
ID=$(json_get "$TMP/body" "d['id']")
curl -s -N "http://127.0.0.1:$PORT/v1/jobs/$ID/events" -o "$TMP/events" -m 60
check "events (SSE) end with event: done" grep -q "^event: done" "$TMP/events"
curl -s -N "${JSON[@]}" "http://127.0.0.1:$PORT/v1/jobs" -d '{"prompt":"a red apple","width":512,"height":512,"steps":1,"seed":40,"batch":2,"stream":true}' -o "$TMP/events2" -m 60
check "events of a 512², 2-image job: progress never goes back, ends at 1 (D9)" python3 -c '
import json, sys
p = [json.loads(l[6:])["progress"] for l in open(sys.argv[1]) if l.startswith("data: ") and "b64_json" not in l]
print("progress", p)
sys.exit(0 if len(p) >= 4 and all(a <= b for a, b in zip(p, p[1:])) and p[-1] == 1 else 1)' "$TMP/events2"
curl -s -N "${JSON[@]}" "http://127.0.0.1:$PORT/v1/jobs" -d '{"prompt":"a red apple","width":64,"height":64,"steps":2,"seed":40,"stream":true}' -o "$TMP/events3" -m 60
b64_to <(sed -n '/^event: result/{n;s/^data: //p}' "$TMP/events3") "d['images'][0]['b64_json']" "$TMP/stream.png"
check "stream: true carries the result in one request (event: result) = the CLI's bytes (D18)" cmp -s "$TMP/stream.png" "$TMP/cli.png"
check "status done with its steps" [ "$(http_code GET "/v1/jobs/$ID")" = 200 -a "$(json_get "$TMP/body" "d['status'], d['step'], d['steps']")" = "done 2 2" ]
check "images/0 = the CLI's bytes" [ "$(http_code GET "/v1/jobs/$ID/images/0")" = 200 ] && cmp -s "$TMP/body" "$TMP/cli.png" && ok "image bytes" || bad "image bytes"
code=$(http_code GET "/v1/jobs/$ID/result")
b64_to "$TMP/body" "d['images'][0]['b64_json']" "$TMP/native.png"
check "result JSON = the CLI's bytes" cmp -s "$TMP/native.png" "$TMP/cli.png"
check "unknown job: 404" [ "$(http_code GET /v1/jobs/job-0000000000000000)" = 404 ]
check "images/5 of a 1-image job: 404" [ "$(http_code GET "/v1/jobs/$ID/images/5")" = 404 ]

echo "== img2img and inpainting: OpenAI edits with a mask, native fields, refusals (issue 31) (${SECONDS} s)"
code=$(http_code POST /v1/images/edits -F image=@"$TMP/cli.png" -F mask=@"$FIX/mask-64-alpha.png" -F prompt='make it blue' -F size=64x64 -F steps=2 -F seed=7)
b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/edit-mask.png"
check "edits with a mask (transparent = edit): 200" [ "$code" = 200 ]
check "edits with a mask: the CLI's --init-img --strength 1 --mask bytes" cmp -s "$TMP/edit-mask.png" "$TMP/cli-inpaint-openai.png"
python3 -c 'import base64, json, sys
url = lambda p: "data:image/png;base64," + base64.b64encode(open(p, "rb").read()).decode()
print(json.dumps({"prompt": "make it blue", "steps": 2, "seed": 7, "strength": 0.5, "mask": {"image_url": url(sys.argv[2])},
                  "images": [{"image_url": url(sys.argv[1])}, {"image_url": url(sys.argv[1])}]}))' \
    "$TMP/cli.png" "$FIX/mask-64-alpha.png" >"$TMP/edit-mask.json"
code=$(http_code POST /v1/images/edits --data-binary @"$TMP/edit-mask.json")
b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/edit-mask-json.png"
check "edits, JSON form with mask {image_url}, strength 0.5: 200" [ "$code" = 200 ]
check "edits, JSON form with mask, strength 0.5, a second image as reference: the CLI's bytes" cmp -s "$TMP/edit-mask-json.png" "$TMP/cli-inpaint-openai-05.png"
refused() { # NAME, PATTERN the message must hold, http_code arguments...: a 400 JSON error
    local name=$1 pattern=$2; shift 2
    local code
    code=$(http_code "$@")
    if [ "$code" = 400 ] && is_json_error 400 && grep -q -- "$pattern" "$TMP/body"; then ok "$name"
    else bad "$name" "$code $(head -c 300 "$TMP/body")"; fi
}
refused "edits: a mask of another size than the image: 400 naming it" "mask: 48x48, not the size of image\[0\] (64x64)" \
    POST /v1/images/edits -F image=@"$TMP/cli.png" -F mask=@"$FIX/mask-48-alpha.png" -F prompt=x -F steps=2
refused "edits: a mask without transparency: 400" "mask: .*transparen" \
    POST /v1/images/edits -F image=@"$TMP/cli.png" -F mask=@"$FIX/mask-64.png" -F prompt=x -F steps=2
refused "edits: strength 0: 400 naming strength" '"strength: 0 with 2 steps leaves no denoising step' \
    POST /v1/images/edits -F image=@"$TMP/cli.png" -F mask=@"$FIX/mask-64-alpha.png" -F prompt=x -F steps=2 -F strength=0
python3 -c 'import base64, json, sys
b = lambda p: base64.b64encode(open(p, "rb").read()).decode()
base = {"prompt": "make it blue", "steps": 2, "seed": 7, "init_image": b(sys.argv[1])}
json.dump(dict(base, strength=0.6, mask=b(sys.argv[2]), mask_invert=True, mask_blur=2.5), open(sys.argv[3] + "-inpaint.json", "w"))
json.dump(base, open(sys.argv[3] + "-i2i.json", "w"))
json.dump(dict(base, strength=1.5), open(sys.argv[3] + "-strength.json", "w"))
json.dump(dict(base, mask=b(sys.argv[1])[:40] + "AAAA"), open(sys.argv[3] + "-badmask.json", "w"))
json.dump({"prompt": "x", "mask": b(sys.argv[2])}, open(sys.argv[3] + "-orphan.json", "w"))' \
    "$TMP/cli.png" "$FIX/mask-64.png" "$TMP/native"
curl -s -N "${JSON[@]}" "http://127.0.0.1:$PORT/v1/jobs" --data-binary @<(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["stream"]=True; print(json.dumps(d))' "$TMP/native-inpaint.json") -o "$TMP/events-inpaint" -m 60
b64_to <(sed -n '/^event: result/{n;s/^data: //p}' "$TMP/events-inpaint") "d['images'][0]['b64_json']" "$TMP/native-inpaint.png"
check "/v1/jobs init_image, strength 0.6, mask, mask_invert, mask_blur 2.5: the CLI's bytes" cmp -s "$TMP/native-inpaint.png" "$TMP/cli-inpaint-native.png"
code=$(http_code POST /v1/jobs --data-binary @"$TMP/native-i2i.json")
ID=$(json_get "$TMP/body" "d['id']")
curl -s -N -o /dev/null -m 60 "http://127.0.0.1:$PORT/v1/jobs/$ID/events"
http_code GET "/v1/jobs/$ID/images/0" >/dev/null
check "/v1/jobs init_image without strength (0.8, the CLI's default): the CLI's bytes" cmp -s "$TMP/body" "$TMP/cli-i2i-native.png"
refused "/v1/jobs strength 1.5: 400" "strength: 1.5 is out of range" POST /v1/jobs --data-binary @"$TMP/native-strength.json"
refused "/v1/jobs a mask that is not an image: 400 naming mask" '"mask' POST /v1/jobs --data-binary @"$TMP/native-badmask.json"
refused "/v1/jobs a mask without init_image: 400" "mask: only used with init_image" POST /v1/jobs --data-binary @"$TMP/native-orphan.json"
a1111_refused() { # NAME, JSON fields added to an inpainting request, the field the 400 must name
    local body
    body=$(python3 -c 'import base64, json, sys
b = lambda p: base64.b64encode(open(p, "rb").read()).decode()
d = {"prompt": "x", "steps": 2, "width": 64, "height": 64, "init_images": [b(sys.argv[1])], "mask": b(sys.argv[2]),
     "inpainting_fill": 1, "inpaint_full_res": False}
d.update(json.loads(sys.argv[3]))
print(json.dumps(d))' "$TMP/cli.png" "$FIX/mask-64.png" "$2")
    refused "A1111 img2img $1: 400 naming $3" "\"$3: " POST /sdapi/v1/img2img -d "$body"
}
a1111_refused "denoising_strength 1.5" '{"denoising_strength": 1.5}' denoising_strength
a1111_refused "denoising_strength 0 (no step left)" '{"denoising_strength": 0}' denoising_strength
a1111_refused "inpainting_fill 0 (fill) with a mask" '{"inpainting_fill": 0}' inpainting_fill
a1111_refused "inpainting_fill absent (A1111 default 0) with a mask" '{"inpainting_fill": null}' inpainting_fill
a1111_refused "inpainting_fill 2 (latent noise)" '{"inpainting_fill": 2}' inpainting_fill
a1111_refused "inpaint_full_res true (only masked)" '{"inpaint_full_res": true}' inpaint_full_res
a1111_refused "resize_mode 1 (crop and resize)" '{"resize_mode": 1}' resize_mode
a1111_refused "mask_round false" '{"mask_round": false}' mask_round
a1111_refused "initial_noise_multiplier 0.9" '{"initial_noise_multiplier": 0.9}' initial_noise_multiplier
a1111_refused "latent_mask" '{"latent_mask": "aGVsbG8="}' latent_mask
a1111_refused "include_init_images true" '{"include_init_images": true}' include_init_images
a1111_refused "mask_blur 65" '{"mask_blur": 65}' mask_blur
a1111_refused "two init_images" "{\"init_images\": [\"$(base64 -w0 "$TMP/cli.png")\", \"$(base64 -w0 "$TMP/cli.png")\"]}" init_images
a1111_refused "a mask that is not an image" '{"mask": "aGVsbG8="}' mask
a1111_refused "width x height above 1024² (the pipeline would shrink it)" '{"width": 1280, "height": 1024}' 'init_images\[0\]'

echo "== bad requests: JSON errors with 4xx, the server keeps serving (${SECONDS} s)"
check "malformed JSON: 400" [ "$(http_code POST /v1/images/generations -d '{"prompt": "x"')" = 400 ] && is_json_error 400 && ok "error body" || bad "error body"
check "not an object: 400" [ "$(http_code POST /sdapi/v1/txt2img -d '[1,2]')" = 400 ]
check "wrong type: 400" [ "$(http_code POST /sdapi/v1/txt2img -d '{"prompt":"x","steps":"many"}')" = 400 ]
check "too deep: 400" [ "$(http_code POST /v1/jobs -d '{"prompt":"x","extra":[[[[[[[[[[1]]]]]]]]]]}')" = 400 ]
check "steps above --max-steps: 400" [ "$(http_code POST /v1/jobs -d '{"prompt":"x","steps":101}')" = 400 ]
check "size not a multiple of 16: 400" [ "$(http_code POST /v1/images/generations -d '{"prompt":"x","size":"100x64"}')" = 400 ]
check "bad base64: 400" [ "$(http_code POST /sdapi/v1/img2img -d '{"prompt":"x","init_images":["***"]}')" = 400 ]
check "not an image: 400" [ "$(http_code POST /sdapi/v1/img2img -d '{"prompt":"x","init_images":["aGVsbG8="]}')" = 400 ]
check "unknown LoRA: 400" [ "$(http_code POST /v1/jobs -d '{"prompt":"x","loras":[{"name":"../etc/passwd"}]}')" = 400 ]
head -c $((40 << 20)) /dev/zero >"$TMP/big"
check "oversized body: 413" [ "$(http_code POST /v1/images/generations --data-binary @"$TMP/big")" = 413 ]
check "unknown endpoint: 404" [ "$(http_code GET /nope)" = 404 ]
check "still serving after the faults" [ "$(http_code GET /health)" = 200 ]

echo "== who may call: Content-Type, Host, Origin, CORS (issue 32 D4) (${SECONDS} s)"
check "text/plain POST (a cross-site form's): 415" [ "$(http_code POST /v1/jobs -H 'Content-Type: text/plain' -d '{"prompt":"x"}')" = 415 ]
check "form-urlencoded POST (curl -d's default): 415" [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/sdapi/v1/interrupt" -d '{}')" = 415 ]
check "application/json; charset=utf-8: accepted" [ "$(http_code POST /sdapi/v1/options -H 'Content-Type: application/json; charset=utf-8' -d '{}')" = 200 ]
check "Host of another name (DNS rebinding): 403" [ "$(http_code GET /v1/models -H 'Host: attacker.example:'"$PORT")" = 403 ]
check "Host localhost:PORT: 200" [ "$(http_code GET /v1/models -H "Host: localhost:$PORT")" = 200 ]
check "Host [::1]:PORT: 200" [ "$(http_code GET /v1/models -H "Host: [::1]:$PORT")" = 200 ]
check "Origin of another site: 403 (jobs)" [ "$(http_code POST /v1/jobs -H 'Origin: http://attacker.example' -d '{"prompt":"x"}')" = 403 ]
check "Origin of another site: 403 (interrupt)" [ "$(http_code POST /sdapi/v1/interrupt -H 'Origin: http://attacker.example')" = 403 ]
check "Origin of the page itself: 200" [ "$(http_code GET /v1/models -H "Origin: http://127.0.0.1:$PORT")" = 200 ]
check "OPTIONS preflight from another site: 403" [ "$(http_code OPTIONS /v1/jobs -H 'Origin: http://attacker.example' -H 'Access-Control-Request-Method: POST')" = 403 ]
check "the page's scripts take no foreign origin: no CORS header" sh -c "! curl -s -D - -o /dev/null 'http://127.0.0.1:$PORT/v1/models' | grep -qi '^Access-Control-Allow-Origin'"

echo "== HTTP details: HEAD, 405 with Allow, stream, output_format, progress (D7, D13, D16) (${SECONDS} s)"
check "HEAD /health: 200" [ "$(curl -s -I -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ]
check "DELETE /health: 405 with Allow" [ "$(curl -s -D "$TMP/headers" -o /dev/null -w '%{http_code}' -X DELETE "http://127.0.0.1:$PORT/health")" = 405 ] && grep -qi '^Allow: GET, HEAD' "$TMP/headers" && ok "Allow header" || bad "Allow header"
check "GET /v1/images/generations: 405" [ "$(http_code GET /v1/images/generations)" = 405 ]
check "/favicon.ico: 204, no key needed; /index.html is the page" [ "$(http_code GET /favicon.ico)" = 204 -a "$(http_code GET /index.html)" = 200 ]
check "OpenAI stream: true: 400, not silently ignored" [ "$(http_code POST /v1/images/generations -d '{"prompt":"x","size":"64x64","stream":true}')" = 400 ]
check "output_format gif: 400, not silently ignored" [ "$(http_code POST /v1/images/generations -d '{"prompt":"x","size":"64x64","output_format":"gif"}')" = 400 ]
check "output_format png: 200" [ "$(http_code POST /v1/images/generations -d '{"prompt":"a red apple","size":"64x64","steps":2,"seed":40,"output_format":"png"}')" = 200 ]

echo "== JPEG and WebP, out and in (${SECONDS} s)"
if command -v djpeg >/dev/null && command -v dwebp >/dev/null; then
    for f in webp jpeg; do
        http_code POST /v1/images/generations -d '{"prompt":"a red apple","size":"64x64","steps":2,"seed":40,"output_format":"'$f'"}' >/dev/null
        b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/out.$f"
    done
    dwebp -quiet "$TMP/out.webp" -ppm -o "$TMP/out-webp.ppm"
    djpeg -outfile "$TMP/out-jpeg.ppm" "$TMP/out.jpeg"
    check "output_format webp (lossless at output_compression 100): dwebp gives the CLI PNG's pixels" \
        python3 tests/server_images.py same "$TMP/cli.png" "$TMP/out-webp.ppm"
    check "output_format jpeg (quality 100, 4:4:4): djpeg's pixels within 35 dB of the CLI PNG's" \
        python3 tests/server_images.py psnr "$TMP/cli.png" "$TMP/out-jpeg.ppm" 35
    http_code POST /v1/images/generations -d '{"prompt":"a red apple","size":"64x64","steps":2,"seed":40,"output_format":"jpeg","output_compression":50}' >/dev/null
    b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/out50.jpeg"
    check "output_compression 50: a smaller JPEG ($(stat -c %s "$TMP/out50.jpeg") < $(stat -c %s "$TMP/out.jpeg") bytes)" \
        [ "$(stat -c %s "$TMP/out50.jpeg")" -lt "$(stat -c %s "$TMP/out.jpeg")" ]
    http_code POST /v1/jobs -d '{"prompt":"a red apple","width":64,"height":64,"steps":2,"seed":40,"output_format":"webp"}' >/dev/null
    W=$(json_get "$TMP/body" "d['id']")
    curl -s -N -o /dev/null -m 60 "http://127.0.0.1:$PORT/v1/jobs/$W/events"
    check "/v1/jobs/ID/images/0 of a webp job: image/webp" sh -c "curl -s -D - -o /dev/null 'http://127.0.0.1:$PORT/v1/jobs/$W/images/0' | grep -qi '^Content-Type: image/webp'"
    # inputs: the JPEG gives the CLI's result for djpeg's pixels; the lossless WebP the CLI's for the PNG
    "$FLUX" -q -d "$MODEL" -p 'make it blue' -W 64 -H 64 -s 2 -S 7 -i "$TMP/out-jpeg.ppm" -o "$TMP/cli-edit-jpeg.png"
    http_code POST /v1/images/edits -F image=@"$TMP/out.jpeg" -F prompt='make it blue' -F size=64x64 -F steps=2 -F seed=7 >/dev/null
    b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/edit-jpeg.png"
    check "a JPEG reference = the CLI's -i bytes for djpeg's PPM of it" cmp -s "$TMP/edit-jpeg.png" "$TMP/cli-edit-jpeg.png"
    http_code POST /sdapi/v1/img2img -d "{\"prompt\":\"make it blue\",\"seed\":7,\"steps\":2,\"width\":64,\"height\":64,\"init_images\":[\"data:image/webp;base64,$(base64 -w0 "$TMP/out.webp")\"]}" >/dev/null
    b64_to "$TMP/body" "d['images'][0]" "$TMP/edit-webp.png"
    check "a lossless WebP init image (img2img) = the CLI's --init-img bytes for the PNG" cmp -s "$TMP/edit-webp.png" "$TMP/cli-i2i.png"
    head -c 2000 "$TMP/out.jpeg" >"$TMP/cut.jpeg" # the headers whole, the scan cut
    check "a cut JPEG: 400 naming the reason" [ "$(http_code POST /v1/images/edits -F image=@"$TMP/cut.jpeg" -F prompt=x -F size=64x64)" = 400 ] && grep -q "JPEG: corrupt data" "$TMP/body" && ok "JPEG error message" || bad "JPEG error message"
else
    not_run "djpeg / dwebp missing (tools/install_deps.sh --server)" "webp out" "jpeg out" "jpeg quality" "webp job" \
        "jpeg in" "webp in" "cut jpeg" "cut jpeg message"
fi
check "a body of 1 MiB+ without images (txt2img): 413" [ "$(head -c $((1100 << 10)) /dev/zero | curl -s -o /dev/null -w '%{http_code}' "${JSON[@]}" --data-binary @- "http://127.0.0.1:$PORT/sdapi/v1/txt2img")" = 413 ]

echo "== a full queue, a client that goes away (${SECONDS} s)"
# a long job runs, one waits (--max-queue 1): the next is refused
# (1024²: long enough that the running job cannot end during the checks)
LONG='{"prompt":"long","width":1024,"height":1024,"steps":100,"seed":1}'
http_code POST /v1/jobs -d "$LONG" >/dev/null; J1=$(json_get "$TMP/body" "d['id']")
wait_state "$PORT" 1 0 # the worker holds it: the next one queues
http_code POST /v1/jobs -d "$LONG" >/dev/null; J2=$(json_get "$TMP/body" "d['id']")
wait_state "$PORT" 1 1
for _ in $(seq 1 300); do # two steps done: the running job's own pace is known
    [ "$(http_code GET "/v1/jobs/$J1")" = 200 ] && [ "$(json_get "$TMP/body" "d['step'] >= 2")" = True ] && break
    sleep 0.05
done
ETA=$(json_get "$TMP/body" "int(d['eta_seconds'])")
code=$(curl -s -D "$TMP/headers" -o "$TMP/body" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/jobs" "${JSON[@]}" -d "$LONG")
check "full queue: 429" [ "$code" = 429 ]
check "429 carries Retry-After" grep -qi "^Retry-After: [0-9]" "$TMP/headers"
RA=$(sed -n 's/^Retry-After: \([0-9]*\).*/\1/ip' "$TMP/headers")
check "Retry-After ($RA s) is of the order of the running 1024², 100-step job's rest ($ETA s; D17)" [ "${RA:-0}" -ge 2 -a $((2 * ${RA:-0})) -ge "${ETA:-1}" ]
check "A1111 progress names no job id (D16)" [ "$(http_code GET /sdapi/v1/progress)" = 200 ] && ! grep -q "$J1" "$TMP/body" && [ "$(json_get "$TMP/body" "d['state']['sampling_steps']")" = 100 ] && ok "progress: no id" || bad "progress: no id"
curl -s "http://127.0.0.1:$PORT/metrics" >"$TMP/metrics"
gone0=$(sed -n 's/^flux_client_disconnects_total //p' "$TMP/metrics")
curl -s -N -o /dev/null -m 1 "http://127.0.0.1:$PORT/v1/jobs/$J1/events"
for _ in $(seq 1 50); do
    [ "$(curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^flux_client_disconnects_total //p')" = $((gone0 + 1)) ] && break
    sleep 0.1
done
check "an event stream's reader leaving is counted (D11)" [ "$(curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^flux_client_disconnects_total //p')" = $((gone0 + 1)) ]
check "/ready 503 while full" [ "$(http_code GET /ready)" = 503 ]
check "queued job: position 0" [ "$(http_code GET "/v1/jobs/$J2")" = 200 -a "$(json_get "$TMP/body" "d['status'], d['position']")" = "queued 0" ]
check "DELETE a queued job: cancelled" [ "$(http_code DELETE "/v1/jobs/$J2")" = 200 -a "$(json_get "$TMP/body" "d['status']")" = cancelled ]
check "A1111 interrupt stops the running job" [ "$(http_code POST /sdapi/v1/interrupt)" = 200 ]
curl -s -N "http://127.0.0.1:$PORT/v1/jobs/$J1/events" -o "$TMP/events" -m 120
check "interrupted job ends cancelled" [ "$(http_code GET "/v1/jobs/$J1")" = 200 -a "$(json_get "$TMP/body" "d['status']")" = cancelled ]
# a synchronous client still connected when its job is interrupted gets a standard status (D8)
curl -s -o "$TMP/sync-int" -w '%{http_code}' "${JSON[@]}" "http://127.0.0.1:$PORT/sdapi/v1/txt2img" -d "$LONG" >"$TMP/sync-int.code" &
C=$!
wait_state "$PORT" 1 0
http_code POST /sdapi/v1/interrupt >/dev/null
wait "$C"
check "interrupted synchronous request: 409 (got $(cat "$TMP/sync-int.code")), not 499" [ "$(cat "$TMP/sync-int.code")" = 409 ] && [ "$(json_get "$TMP/sync-int" "d['error']['code']")" = 409 ] && ok "409 body" || bad "409 body"
# a synchronous client gives up after 1 s: its job is cancelled, the worker is free again
# (1024², 100 steps: ~10 s of work; a 512² job ends within ~1.5 s on an AMX Xeon, so
# the client's departure could come after the job's end)
curl -s "http://127.0.0.1:$PORT/metrics" >"$TMP/metrics"
cancelled=$(sed -n 's/^flux_jobs_total{outcome="cancelled"} //p' "$TMP/metrics")
curl -s -o /dev/null -m 1 -X POST "http://127.0.0.1:$PORT/v1/images/generations" "${JSON[@]}" -d '{"prompt":"gone","size":"1024x1024","steps":100}'
for _ in $(seq 1 300); do
    curl -s "http://127.0.0.1:$PORT/metrics" >"$TMP/metrics"
    grep -q "^flux_jobs_total{outcome=\"cancelled\"} $((cancelled + 1))\$" "$TMP/metrics" &&
        grep -q '^flux_job_running 0' "$TMP/metrics" && break
    sleep 0.1
done
check "client gone: its job is cancelled" grep -q "^flux_jobs_total{outcome=\"cancelled\"} $((cancelled + 1))\$" "$TMP/metrics"
check "client gone: counted in /metrics" grep -q '^flux_client_disconnects_total [1-9]' "$TMP/metrics"
check "/metrics: Prometheus text" grep -q '^# TYPE flux_queue_length gauge' "$TMP/metrics"
check "/metrics: errors by status" grep -q '^flux_http_errors_total{status="429"} 1' "$TMP/metrics"

echo "== OpenAI Node SDK (npm openai) (${SECONDS} s)"
NODE_DIR=$ROOT/build/server-node
if command -v node >/dev/null && command -v npm >/dev/null &&
    { [ -d "$NODE_DIR/node_modules/openai" ] ||
        (mkdir -p "$NODE_DIR" && cd "$NODE_DIR" && npm install --silent --no-audit --no-fund openai@4 >/dev/null 2>&1); }; then
    cat >"$TMP/sdk.mjs" <<'EOF'
import OpenAI from "openai";
import fs from "fs";
const [base, out, ref] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "unused" });
const r = await client.images.generate({ model: "model", prompt: "a red apple", size: "64x64", n: 1,
                                         response_format: "b64_json", steps: 2, seed: 40 });
fs.writeFileSync(out + "-gen.png", Buffer.from(r.data[0].b64_json, "base64"));
const e = await client.images.edit({ image: fs.createReadStream(ref), prompt: "make it blue", size: "64x64",
                                     steps: 2, seed: 7 });
fs.writeFileSync(out + "-edit.png", Buffer.from(e.data[0].b64_json, "base64"));
const mk = await client.images.edit({ image: fs.createReadStream(ref), mask: fs.createReadStream(process.argv[5]),
                                      prompt: "make it blue", steps: 2, seed: 7 });
fs.writeFileSync(out + "-mask.png", Buffer.from(mk.data[0].b64_json, "base64"));
const m = await client.models.list();
console.log("models", m.data.map((x) => x.id).join(","));
EOF
    cp "$TMP/sdk.mjs" "$NODE_DIR/sdk.mjs"
    runs "SDK images.generate / images.edit / models.list ran" "$TMP/sdk.out" \
        node "$NODE_DIR/sdk.mjs" "http://127.0.0.1:$PORT" "$TMP/sdk" "$TMP/cli.png" "$FIX/mask-64-alpha.png"
    check "SDK images.generate = the CLI's bytes" cmp -s "$TMP/sdk-gen.png" "$TMP/cli.png"
    check "SDK images.edit = the CLI's -i bytes" cmp -s "$TMP/sdk-edit.png" "$TMP/cli-edit.png"
    check "SDK images.edit with a mask = the CLI's --init-img --strength 1 --mask bytes" cmp -s "$TMP/sdk-mask.png" "$TMP/cli-inpaint-openai.png"
else
    not_run "npm install openai failed (offline?)" "SDK ran" "SDK images.generate" "SDK images.edit" "SDK images.edit mask"
fi

echo "== the web page in headless Chromium (npm playwright-core) (${SECONDS} s)"
check "GET / serves the page" [ "$(http_code GET /)" = 200 ] && grep -q "<title>flux-server</title>" "$TMP/body" && ok "page title" || bad "page title"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROMIUM" ] && command -v node >/dev/null &&
    { [ -d "$NODE_DIR/node_modules/playwright-core" ] ||
        (mkdir -p "$NODE_DIR" && cd "$NODE_DIR" && npm install --silent --no-audit --no-fund playwright-core@1 >/dev/null 2>&1); }; then
    cat >"$NODE_DIR/page.mjs" <<'EOF'
// Type a prompt, see progress, get the image: the page as a user drives it (1280 px wide),
// then an error, a cancel, the key's storage, and the page 390 px wide (a phone).
// Screenshots: OUT-1280.png, OUT-390.png.
import { chromium } from "playwright-core";
import fs from "fs";
// mode: full, quick (one image), lora (one, with style 0.8), base (one, negative "blurry", guidance 2.5)
const [base, exe, out, mode = "full"] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: exe, args: ["--no-sandbox", "--disable-gpu"] });
const requests = [];
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on("request", (r) => { if (new URL(r.url()).pathname.startsWith("/v1/jobs")) requests.push(r.postData()); });
  await page.goto(base + "/");
  await page.fill("#prompt", "a red apple");
  await page.selectOption("#width", "64");
  await page.selectOption("#height", "64");
  await page.fill("#steps", "2");
  await page.fill("#seed", "40");
  await page.fill("#key", "k3y");
  if (mode === "base") {
    await page.waitForSelector("#negative", { state: "visible" });
    await page.fill("#negative", "blurry");
    await page.fill("#guidance", "2.5");
  }
  if (mode === "lora") {
    await page.waitForSelector("#lora option[value=style]", { state: "attached" });
    await page.selectOption("#lora", "style");
    await page.fill("#lora-scale", "0.8");
  }
  await page.click("#go");
  await page.waitForSelector("#image", { timeout: 120000 });
  await page.waitForFunction(() => document.querySelector("#status").textContent.startsWith("done"));
  const status = await page.textContent("#status");
  const progress = await page.$eval("#bar", (b) => b.value);
  const b64 = await page.$eval("#image", async (img) => {
    const buf = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
    let s = ""; for (const c of buf) s += String.fromCharCode(c);
    return btoa(s);
  });
  fs.writeFileSync(out + ".png", Buffer.from(b64, "base64"));
  const history = await page.$$eval("#history img", (l) => l.length);
  const keyStore = await page.evaluate(() => (localStorage.getItem("flux-key") === null ? "none" : "local") +
                                             "/" + sessionStorage.getItem("flux-key"));
  console.log("status=" + status + " progress=" + progress + " history=" + history + " requests=" + requests.length +
              " key=" + keyStore + " body=" + requests[0]);
  const extras = await page.evaluate(() => ({
    download: document.querySelector("#download").hidden ? "hidden" : document.querySelector("#download").download,
    params: /Seed: 40\b/.test(document.querySelector("#params").textContent),
    stepsMax: document.querySelector("#steps").max,
    baseOnly: document.querySelector(".base-only").hidden,
    lora: document.querySelector("#lora-row").hidden,
    model: document.querySelector("#model").textContent,
  }));
  console.log("extras: download=" + extras.download + " params=" + extras.params + " steps-max=" + extras.stepsMax +
              " base-only-hidden=" + extras.baseOnly + " lora-hidden=" + extras.lora + " model=" + extras.model);
  if (mode === "full") { // the rest: error, cancel, phone
  await page.screenshot({ path: out + "-1280.png", fullPage: true });
  // an error: red, not grey
  await page.$eval("#steps", (e) => e.removeAttribute("max")); // as a page whose limits are out of date
  await page.fill("#steps", "101"); // beyond the server's --max-steps (100)
  await page.click("#go");
  await page.waitForFunction(() => document.querySelector("#status").className === "error");
  const color = await page.$eval("#status", (e) => getComputedStyle(e).color);
  console.log("error-color=" + color.replace(/ /g, "") + " error=" + (await page.textContent("#status")).slice(0, 40));
  // a cancel: an empty bar, no old image
  await page.fill("#steps", "100");
  await page.selectOption("#width", "1024");
  await page.selectOption("#height", "1024");
  await page.click("#go");
  await page.waitForFunction(() => document.querySelector("#bar").value > 0.05, null, { timeout: 60000 });
  await page.click("#cancel");
  await page.waitForFunction(() => document.querySelector("#status").textContent === "cancelled", null, { timeout: 60000 });
  const barAfter = await page.$eval("#bar", (b) => b.value);
  const imageAfter = await page.$$eval("#image", (l) => l.length);
  console.log("cancel: bar=" + barAfter + " image=" + imageAfter);
  // a phone: one column, the result pane as wide as the screen
  await page.setViewportSize({ width: 390, height: 844 });
  await page.selectOption("#width", "64");
  await page.selectOption("#height", "64");
  await page.fill("#steps", "2");
  await page.click("#go");
  await page.waitForSelector("#image", { timeout: 120000 });
  const pane = await page.$eval("#out", (e) => Math.round(e.getBoundingClientRect().width));
  const scroll = await page.evaluate(() => document.documentElement.scrollWidth);
  console.log("phone: result-pane=" + pane + " page-width=" + scroll);
  await page.screenshot({ path: out + "-390.png", fullPage: true });
  }
} finally {
  await browser.close();
}
EOF
    runs "page: prompt typed, Generate clicked, image shown" "$TMP/page.out" \
        node "$NODE_DIR/page.mjs" "http://127.0.0.1:$PORT" "$CHROMIUM" "$TMP/page"
    cat "$TMP/page.out"
    check "page: status and progress at the end, one history entry, one request (D18)" grep -q "status=done: seed 40 progress=1 history=1 requests=1 " "$TMP/page.out"
    check "page: the image = the CLI's bytes" cmp -s "$TMP/page.png" "$TMP/cli.png"
    check "page: the key in sessionStorage, not localStorage (D10)" grep -q " key=none/k3y" "$TMP/page.out"
    check "page: download link, the image's parameters, limits and model from /v1/server" \
        grep -q "extras: download=flux-40.png params=true steps-max=100 base-only-hidden=true lora-hidden=true model=model (distilled)" "$TMP/page.out"
    check "page: an error shows red (D10)" grep -q "error-color=rgb(176,0,32)" "$TMP/page.out"
    check "page: cancel empties the bar and the image (D10)" grep -q "cancel: bar=0 image=0" "$TMP/page.out"
    check "page: 390 px wide, the result pane is the screen's width (D10)" grep -Eq "phone: result-pane=3[5-9][0-9] page-width=390" "$TMP/page.out"
    # img2img in the page (issue 31): an init image, the strength slider, a mask painted with the brush,
    # erased in part, cleared and painted again; at 1280 and 390 px. The request's init image and mask
    # go to the CLI, whose bytes the page's image must be. Screenshots: OUT-WIDTH-painted.png, OUT-WIDTH.png
    cat >"$NODE_DIR/page-inpaint.mjs" <<'EOF'
import { chromium } from "playwright-core";
import fs from "fs";
const [base, exe, out, init, width] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: exe, args: ["--no-sandbox", "--disable-gpu"] });
try {
  const page = await browser.newPage({ viewport: { width: +width, height: 900 } });
  let sent = null;
  page.on("request", (r) => { if (new URL(r.url()).pathname === "/v1/jobs") sent = JSON.parse(r.postData()); });
  await page.goto(base + "/");
  await page.fill("#prompt", "make it blue");
  await page.fill("#steps", "2");
  await page.fill("#seed", "7");
  await page.setInputFiles("#init", init);
  await page.waitForSelector("#init-panel", { state: "visible" });
  await page.waitForFunction(() => document.querySelector("#mask").width > 0);
  await page.$eval("#strength", (e) => { e.value = "0.6"; e.dispatchEvent(new Event("input")); });
  const painted = () => page.$eval("#mask", (c) => {
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0; for (let i = 3; i < d.length; i += 4) n += d[i] >= 128; return n;
  });
  const box = await (await page.$("#mask")).boundingBox();
  const drag = async (x0, y0, x1, y1) => {
    await page.mouse.move(box.x + box.width * x0, box.y + box.height * y0);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * x1, box.y + box.height * y1, { steps: 10 });
    await page.mouse.up();
  };
  await drag(0.15, 0.3, 0.85, 0.6);
  const first = await painted();
  await page.click("#clear-mask");
  const cleared = await painted();
  await drag(0.2, 0.25, 0.7, 0.75);
  const stroke = await painted();
  await page.click("#tool-eraser");
  await drag(0.45, 0.5, 0.46, 0.5);
  const erased = await painted();
  await page.click("#tool-brush");
  await page.screenshot({ path: out + "-" + width + "-painted.png", fullPage: true });
  await page.click("#go");
  await page.waitForSelector("#image", { timeout: 120000 });
  await page.waitForFunction(() => document.querySelector("#status").textContent.startsWith("done"));
  const b64 = await page.$eval("#image", async (img) => {
    const buf = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
    let s = ""; for (const c of buf) s += String.fromCharCode(c);
    return btoa(s);
  });
  fs.writeFileSync(out + ".png", Buffer.from(b64, "base64"));
  const data = (u) => Buffer.from(u.slice(u.indexOf(",") + 1), "base64");
  fs.writeFileSync(out + "-init_image", data(sent.init_image));
  fs.writeFileSync(out + "-mask", data(sent.mask));
  const white = await page.evaluate(async (u) => {
    const img = new Image(); img.src = u; await img.decode();
    const c = document.createElement("canvas"); c.width = img.width; c.height = img.height;
    const x = c.getContext("2d"); x.drawImage(img, 0, 0);
    const d = x.getImageData(0, 0, c.width, c.height).data;
    let n = 0, other = 0;
    for (let i = 0; i < d.length; i += 4) { n += d[i] === 255; other += d[i] !== 255 && d[i] !== 0; }
    return n + "/" + c.width * c.height + (other ? " grey=" + other : "");
  }, sent.mask);
  const scroll = await page.evaluate(() => document.documentElement.scrollWidth);
  console.log("inpaint: first=" + (first > 0) + " cleared=" + cleared + " stroke=" + (stroke > 0) +
              " erased=" + (erased < stroke) + " mask-white=" + white + " strength=" + sent.strength +
              " size-sent=" + ("width" in sent) + " page-width=" + scroll);
  await page.screenshot({ path: out + "-" + width + ".png", fullPage: true });
} finally {
  await browser.close();
}
EOF
    for w in 1280 390; do
        runs "page img2img at $w px: init image, strength, a painted mask, submitted, an image" "$TMP/page-inpaint-$w.out" \
            node "$NODE_DIR/page-inpaint.mjs" "http://127.0.0.1:$PORT" "$CHROMIUM" "$TMP/page-inpaint-$w" "$TMP/cli.png" "$w"
        cat "$TMP/page-inpaint-$w.out"
        check "page img2img at $w px: brush paints, Clear empties, the eraser removes, the mask is white on black, no size sent" \
            grep -Eq "inpaint: first=true cleared=0 stroke=true erased=true mask-white=[1-9][0-9]*/4096 strength=0.6 size-sent=false page-width=$w\$" "$TMP/page-inpaint-$w.out"
        mkdir -p "$TMP/twin-page-$w"
        cp "$TMP/page-inpaint-$w-init_image" "$TMP/twin-page-$w/init_image"
        cp "$TMP/page-inpaint-$w-mask" "$TMP/twin-page-$w/mask"
        (cd "$TMP/twin-page-$w" && "$FLUX" -q -d "$MODEL" -p 'make it blue' -s 2 -S 7 --init-img init_image --strength 0.6 --mask mask -o "$TMP/cli-page-inpaint-$w.png")
        check "page img2img at $w px: the image = the CLI's --init-img --strength 0.6 --mask bytes for what the page sent" \
            cmp -s "$TMP/page-inpaint-$w.png" "$TMP/cli-page-inpaint-$w.png"
        check "page img2img at $w px: the init image sent is the file chosen" cmp -s "$TMP/page-inpaint-$w-init_image" "$TMP/cli.png"
    done
    [ -n "${SERVER_SHOTS:-}" ] && cp "$TMP"/page-inpaint-*-[0-9]*.png "$SERVER_SHOTS"/ 2>/dev/null
    [ -n "${SERVER_SHOTS:-}" ] && cp "$TMP"/page-1280.png "$TMP"/page-390.png "$SERVER_SHOTS"/ 2>/dev/null
else
    not_run "chromium or npm playwright-core missing" "page run" "page status" "page image" "page key" "page extras" \
        "page error" "page cancel" "page phone" \
        "page img2img 1280 ran" "page img2img 1280 mask" "page img2img 1280 image" "page img2img 1280 init" \
        "page img2img 390 ran" "page img2img 390 mask" "page img2img 390 image" "page img2img 390 init"
fi

echo "== LoRA by name from --lora-dir (${SECONDS} s)"
mkdir -p "$TMP/loras"
if [ -x "$TOOLS/gen_lora" ] && "$TOOLS/gen_lora" -d "$MODEL" -o "$TMP/loras/style.safetensors" --format kohya >/dev/null 2>&1; then
    "$FLUX" -q -d "$MODEL" -p 'a red apple' -W 64 -H 64 -s 2 -S 40 --lora "$TMP/loras/style.safetensors:0.8" -o "$TMP/cli-lora.png"
    start_server lora --lora-dir "$TMP/loras"
    check "/sdapi/v1/loras lists style" [ "$(http_code GET /sdapi/v1/loras)" = 200 -a "$(json_get "$TMP/body" "d[0]['name']")" = style ]
    http_code POST /v1/images/generations -d '{"prompt":"a red apple","size":"64x64","steps":2,"seed":40,"loras":[{"name":"style","scale":0.8}]}' >/dev/null
    b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/lora.png"
    check "LoRA request = the CLI's --lora bytes" cmp -s "$TMP/lora.png" "$TMP/cli-lora.png"
    http_code POST /v1/images/generations -d '{"prompt":"a red apple","size":"64x64","steps":2,"seed":40}' >/dev/null
    b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/nolora.png"
    check "the next request without loras = no adapter" cmp -s "$TMP/nolora.png" "$TMP/cli.png"
    http_code POST /sdapi/v1/txt2img -d '{"prompt":"a red apple <lora:style:0.8>","seed":40,"steps":2,"width":64,"height":64,"cfg_scale":7}' >/dev/null
    b64_to "$TMP/body" "d['images'][0]" "$TMP/lora-tag.png"
    check "A1111 prompt tag <lora:style:0.8> = the CLI's --lora bytes for the prompt without it" cmp -s "$TMP/lora-tag.png" "$TMP/cli-lora.png"
    page_once "the page's LoRA picker (style at 0.8)" lora-page "http://127.0.0.1:$PORT" lora "$TMP/cli-lora.png"
    # broken adapters after a good one (D1: the second failing load freed the first's strings again: a
    # double free took the server down): junk bytes, and a LoRA of another model (other shapes)
    head -c 5000 /dev/urandom >"$TMP/loras/junk.safetensors"
    "$TOOLS/gen_model" --preset tiny --heads 3 -o "$TMP/other-model" -q &&
        "$TOOLS/gen_lora" -d "$TMP/other-model" -o "$TMP/loras/other.safetensors" --format kohya >/dev/null
    lora_req() { http_code POST /v1/images/generations -d '{"prompt":"a red apple","size":"64x64","steps":2,"seed":40,"loras":[{"name":"'"$1"'","scale":0.8}]}'; }
    c1=$(lora_req style) c2=$(lora_req junk)
    j2=$(json_get "$TMP/body" "d['error']['message']")
    c3=$(lora_req other)
    j3=$(json_get "$TMP/body" "d['error']['message']")
    check "good, then junk, then another model's LoRA: 200, 400, 400 (got $c1 $c2 $c3; D1)" [ "$c1 $c2 $c3" = "200 400 400" ]
    check "the errors name the adapter, not the server's paths" sh -c "echo '$j2 $j3' | grep -q \"junk\" && echo '$j3' | grep -q shape && ! echo '$j2 $j3' | grep -q '$TMP'"
    check "alive after the broken adapters: /health" [ "$(http_code GET /health)" = 200 ]
    lora_req style >/dev/null
    b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/lora2.png"
    check "the good adapter again = the CLI's --lora bytes" cmp -s "$TMP/lora2.png" "$TMP/cli-lora.png"
    kill -TERM "$PID"; wait "$PID"
    check "the LoRA server exits 0 (no memory error)" [ $? = 0 ]
else
    bad "gen_lora" "$TOOLS/gen_lora missing or failed"
fi

echo "== two servers behind nginx, configured as the README says (D18) (${SECONDS} s)"
if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then
    NGINX=$(command -v nginx || echo /usr/sbin/nginx)
    start_server lb1 --max-queue 1; P1=$PORT; L1=$PID
    start_server lb2 --max-queue 1; P2=$PORT; L2=$PID
    LBPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$TMP/nginx"
    # the README's example itself (the block after its "nginx example" marker), on two local instances
    python3 -c '
import sys
block, on = [], False
for line in open(sys.argv[1]).read().split("\n"):
    if "<!-- nginx example" in line:
        on = True
    elif on and (line.startswith("    ") or (not line.strip() and not block)):
        block.append(line[4:])
    elif on and block and line.strip():
        break
conf = "\n".join(block)
for a, b in (("10.0.0.1:8080", "127.0.0.1:" + sys.argv[2]), ("10.0.0.2:8080", "127.0.0.1:" + sys.argv[3]),
             ("listen 80;", "listen 127.0.0.1:%s;" % sys.argv[4])):
    assert a in conf, a
    conf = conf.replace(a, b)
print(conf)' README.md "$P1" "$P2" "$LBPORT" >"$TMP/nginx/site.conf"
    cat >"$TMP/nginx/nginx.conf" <<NGINX_CONF
user root;
worker_processes 1;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log;
events { worker_connections 256; }
http {
    access_log $TMP/nginx/access.log;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    include $TMP/nginx/site.conf;
}
NGINX_CONF
    "$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" >"$TMP/nginx/out.log" 2>&1 &
    NG=$!
    PIDS+=("$NG")
    for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$LBPORT/health" && break; sleep 0.1; done
    PORT=$LBPORT
    same=0
    for i in 1 2 3 4; do
        http_code POST /v1/images/generations -d '{"prompt":"a red apple","size":"64x64","steps":2,"seed":40}' >/dev/null
        b64_to "$TMP/body" "d['data'][0]['b64_json']" "$TMP/lb.png" && cmp -s "$TMP/lb.png" "$TMP/cli.png" && same=$((same + 1))
    done
    check "through nginx: 4 images, each = the CLI's bytes" [ $same = 4 ]
    i1=$(curl -s "http://127.0.0.1:$P1/metrics" | sed -n 's/^flux_images_total //p')
    i2=$(curl -s "http://127.0.0.1:$P2/metrics" | sed -n 's/^flux_images_total //p')
    check "both servers served (images $i1 + $i2)" [ "${i1:-0}" -ge 1 -a "${i2:-0}" -ge 1 -a $((i1 + i2)) = 4 ]
    native=0
    for i in $(seq 1 10); do # the native API: submit, events, status, result, image: every follow-up finds its job
        [ "$(http_code POST /v1/jobs -d '{"prompt":"a red apple","width":64,"height":64,"steps":2,"seed":40}')" = 202 ] || continue
        N=$(json_get "$TMP/body" "d['id']")
        curl -s -N -m 60 -o "$TMP/lb-events" "http://127.0.0.1:$LBPORT/v1/jobs/$N/events"
        grep -q "^event: done" "$TMP/lb-events" && [ "$(http_code GET "/v1/jobs/$N")" = 200 ] &&
            [ "$(http_code GET "/v1/jobs/$N/result")" = 200 ] && [ "$(http_code GET "/v1/jobs/$N/images/0")" = 200 ] &&
            cmp -s "$TMP/body" "$TMP/cli.png" && native=$((native + 1))
    done
    check "through nginx: the native API, 10 jobs, all follow-ups answered ($native/10)" [ $native = 10 ]
    page_once "through nginx: the page (one request per image)" lb-page "http://127.0.0.1:$LBPORT" quick "$TMP/cli.png"
    # fill server 1 (one running, one queued): nginx sends the synchronous requests to server 2
    PORT=$P1
    http_code POST /v1/jobs -d "$LONG" >/dev/null; A1=$(json_get "$TMP/body" "d['id']")
    wait_state "$P1" 1 0 # the worker holds it before the next one queues
    http_code POST /v1/jobs -d "$LONG" >/dev/null; A2=$(json_get "$TMP/body" "d['id']")
    wait_state "$P1" 1 1
    PORT=$LBPORT
    i2=$(curl -s "http://127.0.0.1:$P2/metrics" | sed -n 's/^flux_images_total //p')
    c1=$(http_code POST /v1/images/generations -d '{"prompt":"on","size":"64x64","steps":1}')
    c2=$(http_code POST /v1/images/generations -d '{"prompt":"on","size":"64x64","steps":1}')
    j2=$(curl -s "http://127.0.0.1:$P2/metrics" | sed -n 's/^flux_images_total //p')
    check "server 1 full: both requests answered 200 by server 2 ($c1 $c2, +$((j2 - i2)))" [ "$c1 $c2" = "200 200" -a $((j2 - i2)) = 2 ]
    # now server 2 is full too: the next client gets 429
    PORT=$P2
    wait_state "$P2" 0 0
    http_code POST /v1/jobs -d "$LONG" >/dev/null; B1=$(json_get "$TMP/body" "d['id']")
    wait_state "$P2" 1 0
    http_code POST /v1/jobs -d "$LONG" >/dev/null; B2=$(json_get "$TMP/body" "d['id']")
    wait_state "$P2" 1 1
    PORT=$LBPORT
    code=$(curl -s -D "$TMP/headers" -o "$TMP/body" -w '%{http_code}' "${JSON[@]}" "http://127.0.0.1:$LBPORT/v1/images/generations" -d '{"prompt":"on","size":"64x64","steps":1}')
    check "both full: the client gets 429 with Retry-After (got $code)" [ "$code" = 429 ] && grep -qi "^Retry-After:" "$TMP/headers" && ok "Retry-After passed on" || bad "Retry-After passed on"
    # cancel everything, so the servers exit at once (queued first)
    for j in "$P1 $A2" "$P1 $A1" "$P2 $B2" "$P2 $B1"; do
        set -- $j
        [ -n "${2:-}" ] && curl -s -o /dev/null -X DELETE "http://127.0.0.1:$1/v1/jobs/$2"
    done
    kill -TERM "$NG" "$L1" "$L2"; wait "$NG" "$L1" "$L2" 2>/dev/null
    PORT=$MAIN_PORT PID=$MAIN_PID
else
    not_run "nginx missing (apt-get install nginx-light)" "nginx images" "nginx both" "nginx native" "nginx page" \
        "nginx page image" "nginx spill" "nginx 429" "nginx Retry-After"
fi

echo "== load: ${LOAD_REQUESTS:=200} requests from ${LOAD_CLIENTS:=16} clients, hostile ones meanwhile (${SECONDS} s)"
for seed in 11 12 13 14; do
    "$FLUX" -q -d "$MODEL" -p 'load test' -W 64 -H 64 -s 1 -S $seed -o "$TMP/seed-$seed.png"
done
# under ASan a small quarantine, so freed memory held back does not read as growth
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4" start_server load --max-queue 4 --lora-dir "$TMP/loras" \
    --header-timeout 2
runs "load: every answer 200 and its seed's CLI bytes, N images counted, RSS flat; hostile requests refused" \
    "$TMP/load.out" python3 tests/server_load.py "http://127.0.0.1:$PORT" "$PID" "$LOAD_REQUESTS" "$LOAD_CLIENTS" "$TMP" \
    --hostile junk other
grep "^load:" "$TMP/load.out"
kill -TERM "$PID"; wait "$PID"
check "load: the server exits 0 after it" [ $? = 0 ]
PORT=$MAIN_PORT PID=$MAIN_PID

echo "== hostile clients: idle and slow sockets, big bodies, a chunked flood (D2, D3, D12) (${SECONDS} s)"
# (under ASan a small quarantine, so freed bodies held back do not read as the parse's memory)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4" start_server guard --header-timeout 3 --access-log
runs "72 idle + 80 dripping sockets: /health answered within 2 s throughout, all of them closed (D2)" \
    "$TMP/lockout.out" python3 tests/server_attacks.py lockout "$PORT" 3
grep "^lockout:" "$TMP/lockout.out"
runs "an endless chunked body is cut near the limit, not read to its end (D12)" \
    "$TMP/chunked.out" python3 tests/server_attacks.py chunked "$PORT"
grep "^chunked:" "$TMP/chunked.out"
runs "4 x 32 MB JSON arrays: unread field skipped, read field capped, peak RSS + < 320 MB (D3)" \
    "$TMP/bigjson.out" python3 tests/server_attacks.py bigjson "$PORT" "$PID"
grep "^bigjson:" "$TMP/bigjson.out"
check "/metrics: open connections and dropped ones" sh -c "curl -s 'http://127.0.0.1:$PORT/metrics' | grep -q '^flux_http_connections_dropped_total [1-9]'"
check "the server lives on" [ "$(http_code GET /health)" = 200 ]
curl -s -o /dev/null "http://127.0.0.1:$PORT/a%0Ab%20c"
check "--access-log: a path with a newline stays on its line" grep -q ' GET /a?b?c 404 ' "$TMP/guard.log"
check "--access-log: time, client, method, path, status, bytes, seconds" \
    grep -Eq '^flux-server: 20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z 127\.0\.0\.1 GET /health 200 16 [0-9]+\.[0-9]{3}$' "$TMP/guard.log"
curl -s -D "$TMP/headers-202" -o /dev/null "${JSON[@]}" "http://127.0.0.1:$PORT/v1/jobs" -d '{"prompt":"x","width":64,"height":64,"steps":1}'
check "the async 202 goes through the common reply path: security headers and its access-log line" \
    sh -c "grep -q '^HTTP/1.1 202' '$TMP/headers-202' && grep -qi '^X-Content-Type-Options: nosniff' '$TMP/headers-202' &&
           grep -qi '^Cache-Control: no-store' '$TMP/headers-202' && grep -Eq ' POST /v1/jobs 202 [0-9]+ ' '$TMP/guard.log'"
check "OpenMP waits passively (D19): OMP_WAIT_POLICY=passive in its environment" \
    sh -c "tr '\\0' '\\n' </proc/$PID/environ | grep -qx OMP_WAIT_POLICY=passive"
kill -TERM "$PID"; wait "$PID"
start_server perip --max-conn-per-ip 2 --max-connections 16
http_code POST /v1/jobs -d "$LONG" >/dev/null; PJ=$(json_get "$TMP/body" "d['id']")
curl -s -N -o /dev/null -m 8 "http://127.0.0.1:$PORT/v1/jobs/$PJ/events" & E1=$!
curl -s -N -o /dev/null -m 8 "http://127.0.0.1:$PORT/v1/jobs/$PJ/events" & E2=$!
sleep 1
third=$(curl -s -o /dev/null -w '%{http_code}' -m 5 "http://127.0.0.1:$PORT/health")
check "--max-conn-per-ip 2: a third request while two streams are served gets 429 (got $third)" [ "$third" = 429 ]
kill "$E1" "$E2" 2>/dev/null; wait "$E1" "$E2" 2>/dev/null
for _ in $(seq 1 50); do [ "$(http_code GET /health)" = 200 ] && break; sleep 0.1; done
check "... and served again once they closed" [ "$(http_code GET /health)" = 200 ]
http_code DELETE "/v1/jobs/$PJ" >/dev/null
kill -TERM "$PID"; wait "$PID"
OMP_WAIT_POLICY=active start_server omp
check "OpenMP: a wait policy the user set is kept (OMP_WAIT_POLICY=active)" sh -c "tr '\\0' '\\n' </proc/$PID/environ | grep -qx OMP_WAIT_POLICY=active"
kill -TERM "$PID"; wait "$PID"

echo "== the page on a base model: negative prompt and guidance (${SECONDS} s)"
"$FLUX" -q -d "$ROOT/tests/golden/model-base" -p 'a red apple' --negative blurry -g 2.5 -W 64 -H 64 -s 2 -S 40 \
    -o "$TMP/cli-base.png"
MODEL_SAVED=$MODEL MODEL=$ROOT/tests/golden/model-base
start_server base
MODEL=$MODEL_SAVED
page_once "the page on a base model (negative blurry, guidance 2.5)" base-page "http://127.0.0.1:$PORT" base "$TMP/cli-base.png"
kill -TERM "$PID"; wait "$PID"

echo "== limits of the output size and of kept results (D5, D6) (${SECONDS} s)"
"$FLUX" -q -d "$MODEL" -p 'a red apple' -W 128 -H 128 -s 1 -S 5 -o "$TMP/ref128.png"
start_server small --max-size 64 --result-ttl 2
check "--max-size 64: a 128² reference without a size: 400 (D5)" [ "$(http_code POST /v1/images/edits -F image=@"$TMP/ref128.png" -F prompt=x -F steps=1)" = 400 ]
check "... with size 64x64: 200" [ "$(http_code POST /v1/images/edits -F image=@"$TMP/ref128.png" -F prompt=x -F steps=1 -F size=64x64)" = 200 ]
http_code POST /v1/jobs -d '{"prompt":"x","width":64,"height":64,"steps":1}' >/dev/null; T1=$(json_get "$TMP/body" "d['id']")
curl -s -N -o /dev/null -m 60 "http://127.0.0.1:$PORT/v1/jobs/$T1/events"
check "a finished job is there at once" [ "$(http_code GET "/v1/jobs/$T1/result")" = 200 ]
sleep 3
check "--result-ttl 2: forgotten 3 s later (D6)" [ "$(http_code GET "/v1/jobs/$T1")" = 404 ]
kill -TERM "$PID"; wait "$PID"
start_server cap --max-results-mb 1 --cors-origin https://app.example
check "--cors-origin: its preflight answered 204 with the CORS headers" sh -c "curl -s -D - -o /dev/null -X OPTIONS \
    -H 'Origin: https://app.example' -H 'Access-Control-Request-Method: POST' 'http://127.0.0.1:$PORT/v1/jobs' |
    grep -q '^HTTP/1.1 204' && curl -s -D - -o /dev/null -X OPTIONS -H 'Origin: https://app.example' \
    'http://127.0.0.1:$PORT/v1/jobs' | grep -qi '^Access-Control-Allow-Headers: Authorization, Content-Type'"
check "--cors-origin: its requests carry Access-Control-Allow-Origin; another origin still 403" sh -c "curl -s -D - \
    -o /dev/null -H 'Origin: https://app.example' 'http://127.0.0.1:$PORT/v1/models' |
    grep -qi '^Access-Control-Allow-Origin: https://app.example' &&
    [ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Origin: https://evil.example' 'http://127.0.0.1:$PORT/v1/models') = 403 ]"
for k in 1 2; do
    http_code POST /v1/jobs -d '{"prompt":"x","width":512,"height":512,"steps":1,"seed":'$k'}' >/dev/null
    eval "B$k=$(json_get "$TMP/body" "d['id']")"
    curl -s -N -o /dev/null -m 60 "http://127.0.0.1:$PORT/v1/jobs/$(eval echo \$B$k)/events"
done
check "--max-results-mb 1: two 512² results (~0.6 MB each): the older one forgotten (D6)" [ "$(http_code GET "/v1/jobs/$B1")" = 404 -a "$(http_code GET "/v1/jobs/$B2/images/0")" = 200 ]
kill -TERM "$PID"; wait "$PID"

echo "== API key and binding (${SECONDS} s)"
start_server key --api-key s3cret --timeout 1
check "no key: 401" [ "$(http_code GET /v1/models)" = 401 ]
check "wrong key: 401" [ "$(http_code GET /v1/models -H 'Authorization: Bearer nope')" = 401 ]
check "right key: 200" [ "$(http_code GET /v1/models -H 'Authorization: Bearer s3cret')" = 200 ]
check "HTTP Basic with the key as password: 200" [ "$(http_code GET /v1/models -u "webui:s3cret")" = 200 ]
check "HTTP Basic with a wrong password: 401" [ "$(http_code GET /v1/models -u "webui:nope")" = 401 ]
check "the key is asked before the body is read: 401 for 40 MB unauthenticated" [ "$(http_code POST /v1/jobs --data-binary @"$TMP/big")" = 401 ]
check "/health needs no key" [ "$(http_code GET /health)" = 200 ]
# a client that stops sending mid-body is dropped after --timeout (1 s here; the check allows 60)
check "slow client dropped" python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret\r\nContent-Type: application/json\r\n"
          b"Content-Length: 100\r\n\r\n{\"pro")
s.settimeout(60)
sys.exit(0 if s.recv(1) == b"" else 1)' "$PORT"
check "still serving after the slow client" [ "$(http_code GET /health)" = 200 ]
kill -TERM "$PID"; wait "$PID"
"$SERVER" -d "$MODEL" --host 0.0.0.0 --port 0 >"$TMP/nokey.log" 2>&1
check "--host 0.0.0.0 without --api-key: exit 2" [ $? = 2 ] && grep -q "needs --api-key" "$TMP/nokey.log" && ok "message" || bad "message"
"$SERVER" -d "$MODEL" -p cat >"$TMP/gen.log" 2>&1
check "-p: exit 2, not a server option" [ $? = 2 ] && grep -q "not a flux-server option" "$TMP/gen.log" && ok "message" || bad "message"

echo "== SIGTERM mid-queue drains (${SECONDS} s)"
PID=$MAIN_PID PORT=$MAIN_PORT
MID='{"prompt":"drain","size":"256x256","steps":20,"seed":3}'
curl -s -o "$TMP/d1" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/images/generations" "${JSON[@]}" -d "$MID" >"$TMP/c1" &
C1=$!
for _ in $(seq 1 100); do # the first job runs before the second is sent
    curl -s "http://127.0.0.1:$PORT/metrics" | grep -q '^flux_job_running 1' && break
    sleep 0.05
done
curl -s -o "$TMP/d2" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/images/generations" "${JSON[@]}" -d "$MID" >"$TMP/c2" &
C2=$!
for _ in $(seq 1 100); do
    curl -s "http://127.0.0.1:$PORT/metrics" | grep -q '^flux_queue_length 1' && break
    sleep 0.05
done
kill -TERM "$PID"
sleep 0.2
late=$(http_code POST /v1/images/generations -d "$MID")
check "during the drain new jobs get 503 (or the port is closed)" [ "$late" = 503 -o "$late" = 000 ]
wait "$C1" "$C2"
check "running job answered 200" [ "$(cat "$TMP/c1")" = 200 ]
check "queued job answered 200" [ "$(cat "$TMP/c2")" = 200 ]
wait "$PID"
rc=$?
check "exit 0 after draining (no leaks under SANITIZE=1)" [ "$rc" = 0 ]
[ "$rc" = 0 ] || tail -20 "$TMP/main.log"

echo "== SIGHUP drains too; a /v1/jobs result finished in the drain stays fetchable (D14, D15) (${SECONDS} s)"
start_server hup
http_code POST /v1/jobs -d '{"prompt":"drain","width":256,"height":256,"steps":20,"seed":3}' >/dev/null
H1=$(json_get "$TMP/body" "d['id']")
wait_state "$PORT" 1 0
kill -HUP "$PID"
for _ in $(seq 1 600); do
    [ "$(http_code GET "/v1/jobs/$H1")" = 200 ] && [ "$(json_get "$TMP/body" "d['status']")" = done ] && break
    sleep 0.1
done
check "SIGHUP: the running job finishes" [ "$(json_get "$TMP/body" "d['status']")" = done ]
sleep 1 # a client polling every second
check "its result is still served a second later (D14)" [ "$(http_code GET "/v1/jobs/$H1/result")" = 200 ]
wait "$PID"
check "then the server exits 0" [ $? = 0 ]

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
