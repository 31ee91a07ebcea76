#!/usr/bin/env bash
# install_deps.sh — install what flux.c needs on a Debian/Ubuntu box, when it can.
#
#   tools/install_deps.sh          build: C compiler, make, libpng, pkg-config;
#                                  npm (fetches the real tokenizer for demo/tests)
#   tools/install_deps.sh --test   + the aarch64 cross compiler and qemu for the
#                                  NEON kernel tests, SIMDe (header-only) for
#                                  the x86 kernel tests on emulated AVX-512/AMX,
#                                  python3 (independent file readers), clang and
#                                  its libFuzzer runtime for the fuzz
#                                  targets (CI)
#   tools/install_deps.sh --vulkan + the Vulkan build and test deps (headers and
#                                  loader, glslc, Mesa lavapipe, validation
#                                  layers) for `make VULKAN=1` (combinable)
#   tools/install_deps.sh --server + libmicrohttpd, libjpeg, libwebp (make server) and what
#                                  its tests drive: curl, python3, nginx, djpeg, dwebp
#                                  (two servers behind it), chromium (the web
#                                  page, with npm playwright-core) (combinable)
#   --optional                     what cannot be installed is reported, not
#                                  an error (`make test`: the suites that need
#                                  it then say they did not run and why)
#
# Only missing pieces are installed, with apt-get as root or through sudo.
# Without either it prints the command to run and fails (or, with
# --optional, prints it and succeeds).
set -euo pipefail

want_test=0 want_vulkan=0 want_server=0 optional=0
for arg in "$@"; do
    case $arg in
    --test) want_test=1 ;;
    --vulkan) want_vulkan=1 ;;
    --server) want_server=1 ;;
    --optional) optional=1 ;;
    *) echo "install_deps: unknown option $arg (--test, --vulkan, --server, --optional)" >&2; exit 2 ;;
    esac
done
# cannot install: fail, or with --optional say what is missing and go on
cannot() {
    echo "install_deps: $1" >&2
    if [ $optional -eq 1 ]; then
        echo "install_deps: going on without them; the tests that need them report it" >&2
        exit 0
    fi
    exit 1
}

missing=()
have() { command -v "$1" >/dev/null 2>&1; }
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

have cc || have gcc || missing+=(build-essential)
have make || missing+=(make)
have pkg-config || missing+=(pkg-config)
if ! (have pkg-config && pkg-config --exists libpng 2>/dev/null) && ! pkg_installed libpng-dev; then
    missing+=(libpng-dev zlib1g-dev)
fi
have npm || missing+=(nodejs npm)
if [ $want_test -eq 1 ]; then
    have aarch64-linux-gnu-gcc || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
    have qemu-aarch64-static || missing+=(qemu-user-static)
    have python3 || missing+=(python3) # the independent fp8 file reader (tests/pipeline/fp8_listing.py)
    # NumPy: the independent writers of the quantized layouts and single files (tests/formats/*.py)
    pkg_installed python3-numpy || missing+=(python3-numpy)
    [ -f /usr/include/simde/x86/avx512.h ] || pkg_installed libsimde-dev || missing+=(libsimde-dev)
    have clang || missing+=(clang)
fi

# libFuzzer's runtime: part of clang's packages, or libclang-rt-N-dev (Debian 12+)
fuzzer_ok() {
    have clang || return 1
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' |
        clang -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1
}
if [ $want_test -eq 1 ] && have clang && ! fuzzer_ok; then
    missing+=("libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev")
fi
if [ $want_server -eq 1 ]; then
    [ -f /usr/include/microhttpd.h ] || pkg_installed libmicrohttpd-dev || missing+=(libmicrohttpd-dev)
    [ -f /usr/include/jpeglib.h ] || missing+=(libjpeg-dev)
    [ -f /usr/include/webp/encode.h ] || pkg_installed libwebp-dev || missing+=(libwebp-dev)
    have djpeg || missing+=(libjpeg-turbo-progs) # the tests' independent JPEG and WebP decoders
    have dwebp || missing+=(webp)
    have curl || missing+=(curl)
    have python3 || missing+=(python3)
    have nginx || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
    have chromium || missing+=(chromium)
fi
if [ $want_vulkan -eq 1 ]; then
    pkg_installed libvulkan-dev || missing+=(libvulkan-dev)
    have glslc || missing+=(glslc)
    pkg_installed mesa-vulkan-drivers || missing+=(mesa-vulkan-drivers)
    pkg_installed vulkan-validationlayers || missing+=(vulkan-validationlayers)
fi

[ ${#missing[@]} -eq 0 ] && exit 0

have apt-get || cannot "please install: ${missing[*]} (no apt-get on this system)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    # --optional (make test) never stops to ask for a password: sudo -n
    if have sudo && { [ $optional -eq 0 ] || sudo -n true 2>/dev/null; }; then
        SUDO="sudo"; [ $optional -eq 1 ] && SUDO="sudo -n"
    else
        cannot "as root run: apt-get install -y ${missing[*]}"
    fi
fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || cannot "apt-get update failed; as root run: apt-get install -y ${missing[*]}"
$SUDO apt-get install -y --no-install-recommends ca-certificates "${missing[@]}" ||
    cannot "apt-get install failed; as root run: apt-get install -y ${missing[*]}"
if [ $want_test -eq 1 ] && ! fuzzer_ok; then # clang was new: its fuzzer runtime may be a separate package
    $SUDO apt-get install -y --no-install-recommends "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
fi
