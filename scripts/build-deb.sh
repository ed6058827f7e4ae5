#!/usr/bin/env bash
# Builds the Debian package of proxypool from the release binary, with dpkg-deb:
#
#   OUT_DIR/proxypool_VERSION_ARCH.deb
#
# It installs:
#   /usr/bin/proxypool                          the binary, as scripts/build-release.sh made it
#   /lib/systemd/system/proxypool-*.service     the units of deploy/systemd/ (never enabled
#                                               or started by the package)
#   /usr/lib/sysusers.d/proxypool.conf          their accounts, proxypool and proxypool-gateway
#                                               (deploy/systemd/proxypool.sysusers)
#   /etc/proxypool/proxypool.toml, gateway.toml a one-machine start (deploy/debian/config/),
#                                               conffiles: an upgrade keeps your edits
#   /etc/proxypool/secrets/                     the controller's secret files (group proxypool)
#   /etc/proxypool/gateway-secrets/             the gateway's (group proxypool-gateway)
#   /usr/share/doc/proxypool/                   copyright, changelog, README, vendors.md and the
#                                               complete examples
#   /usr/share/man/man1/proxypool.1.gz          the binary's help of every command, as a page
# The maintainer scripts are deploy/debian/{postinst,prerm,postrm}.
#
# Version is the workspace's (Cargo.toml), which the binary must print; Architecture is
# dpkg's; Depends comes from dpkg-shlibdeps (dpkg-dev), or without it from the versions of
# the C library's and libgcc's symbols the binary uses, which is what dpkg-shlibdeps
# reads from their symbols files. Maintainer is "$DEBFULLNAME <$DEBEMAIL>" when DEBEMAIL is
# set (the variables Debian's tools read), a placeholder otherwise. File times are clamped
# to SOURCE_DATE_EPOCH (default: the last commit's time), so the same inputs give the
# same package.
#
# Usage: scripts/build-deb.sh [BINARY [OUT_DIR]]
#          BINARY   default target/dist/proxypool (scripts/build-release.sh target/dist)
#          OUT_DIR  default the binary's directory
#        scripts/build-deb.sh --depends [BINARY]
#          prints the Depends field only; PROXYPOOL_DEB_NO_SHLIBDEPS=1 computes it without
#          dpkg-shlibdeps (the tests compare both)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() {
  echo "error: $*" >&2
  exit 1
}

# Depends of an ELF binary: dpkg-shlibdeps, run in a scratch tree shaped as it expects (a
# debian/control naming the package, the binary in a package tree, debian/PACKAGE/ with
# its DEBIAN/).
depends_from_shlibdeps() {
  local binary=$1 work
  work=$(mktemp -d)
  mkdir -p "$work/debian/proxypool/usr/bin" "$work/debian/proxypool/DEBIAN"
  printf 'Source: proxypool\n\nPackage: proxypool\nArchitecture: any\n' >"$work/debian/control"
  cp "$binary" "$work/debian/proxypool/usr/bin/proxypool"
  (cd "$work" && dpkg-shlibdeps -O debian/proxypool/usr/bin/proxypool) |
    sed -n 's/^shlibs:Depends=//p'
  rm -rf "$work"
}

# The same from the binary alone: each library it needs must be one of the C library's or
# libgcc's (anything else needs dpkg-shlibdeps), and the lowest version that has every
# versioned symbol it uses is the one its symbols need (GLIBC_2.34 -> libc6 (>= 2.34),
# GCC_4.2.0 -> libgcc-s1 (>= 4.2)).
depends_from_symbols() {
  local binary=$1 lib libc=0 libgcc=0 glibc gcc depends
  command -v objdump >/dev/null 2>&1 || die "objdump not found; install binutils"
  while read -r lib; do
    case $lib in
    libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | ld-linux*.so.*) libc=1 ;;
    libgcc_s.so.1) libgcc=1 ;;
    *) die "$binary needs $lib: install dpkg-dev, whose dpkg-shlibdeps knows its package" ;;
    esac
  done < <(objdump -p "$binary" | awk '$1 == "NEEDED" { print $2 }')
  ((libc)) || die "$binary does not link the C library: not the release binary?"
  glibc=$(objdump -T "$binary" | grep -oE '\(GLIBC_[0-9.]+\)' | tr -d '()' |
    sed 's/^GLIBC_//' | sort -uV | tail -n 1)
  [[ -n $glibc ]] || die "$binary uses no versioned symbol of the C library"
  depends="libc6 (>= $glibc)"
  if ((libgcc)); then
    gcc=$(objdump -T "$binary" | grep -oE '\(GCC_[0-9.]+\)' | tr -d '()' |
      sed 's/^GCC_//' | sort -uV | tail -n 1 | cut -d. -f1,2)
    depends+=", libgcc-s1${gcc:+ (>= $gcc)}"
  fi
  printf '%s\n' "$depends"
}

depends_of() {
  if [[ ${PROXYPOOL_DEB_NO_SHLIBDEPS:-} != 1 ]] && command -v dpkg-shlibdeps >/dev/null 2>&1; then
    depends_from_shlibdeps "$1"
  else
    depends_from_symbols "$1"
  fi
}

# Text for a manual page's no-fill block: backslashes and leading control characters
# escaped.
roff_text() {
  sed -e 's/\\/\\e/g' -e 's/^\([.'"'"']\)/\\\&\1/'
}

# The manual page, made from the binary's own help (its summary, then every command's
# --help), so it says what this very binary does.
manual_page() {
  local binary=$1 version=$2 command summary
  summary=$(sed -n 's/^Description: //p' deploy/debian/control)
  printf '.TH PROXYPOOL 1 "%s" "proxypool %s" "proxypool"\n' \
    "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)" "$version"
  printf '.SH NAME\nproxypool \\- %s\n' "$summary"
  printf '.SH SYNOPSIS\n.B proxypool\n.I COMMAND\n[\\fIOPTIONS\\fR]\n'
  printf '.SH DESCRIPTION\n.nf\n'
  "$binary" --help | roff_text
  printf '.fi\n'
  while read -r command; do
    printf '.SH "proxypool %s"\n.nf\n' "$command"
    "$binary" "$command" --help | roff_text
    printf '.fi\n'
  done < <("$binary" --help | awk '/^Commands:/ { on = 1; next } on && NF == 0 { exit }
    on && $1 != "help" { print $1 }')
  printf '.SH FILES\n.TP\n/etc/proxypool/proxypool.toml\n'
  printf "The controller's file (proxypool-controller.service).\\n"
  printf '.TP\n/etc/proxypool/gateway.toml\n'
  printf "The gateway's file (proxypool-gateway.service).\\n"
  printf "%s\n" '.TP' /etc/proxypool/secrets/ "The controller's secret files (group proxypool)."
  printf "%s\n" '.TP' /etc/proxypool/gateway-secrets/ \
    "The gateway's secret files (group proxypool-gateway)."
  printf '.SH SEE ALSO\n/usr/share/doc/proxypool/README.md.gz,\n'
  printf '/usr/share/doc/proxypool/examples/ (every configuration key)\n'
}

if [[ ${1:-} == --depends ]]; then
  binary=${2:-target/dist/proxypool}
  [[ -f $binary ]] || die "$binary not found"
  depends_of "$binary"
  exit 0
fi

binary=${1:-target/dist/proxypool}
[[ -f $binary ]] || die "$binary not found: build it with scripts/build-release.sh first"
out=${2:-$(dirname "$binary")}
command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb not found; install dpkg"

# The version of [workspace.package] in Cargo.toml; the binary must be that build.
version=$(awk '
  /^\[/ { section = $0 }
  section == "[workspace.package]" && $1 == "version" {
    value = $0; sub(/^[^"]*"/, "", value); sub(/".*$/, "", value); print value; exit
  }' Cargo.toml)
[[ $version =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || die "no usable [workspace.package] version in Cargo.toml: '$version'"
said=$("$binary" --version 2>&1) || die "$binary --version failed: $said"
[[ $said == "proxypool $version" ]] ||
  die "$binary prints '$said', not 'proxypool $version': rebuild it (scripts/build-release.sh)"
arch=$(dpkg --print-architecture)
depends=$(depends_of "$binary")
[[ -n $depends ]] || die "no Depends computed for $binary"
maintainer="proxypool maintainers <maintainers@proxypool.invalid>"
if [[ -n ${DEBEMAIL:-} ]]; then
  maintainer="${DEBFULLNAME:-proxypool maintainers} <$DEBEMAIL>"
fi
if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
umask 022

install -D -m 0755 "$binary" "$root/usr/bin/proxypool"
for unit in proxypool-controller.service proxypool-gateway.service; do
  install -D -m 0644 "deploy/systemd/$unit" "$root/lib/systemd/system/$unit"
done
install -D -m 0644 deploy/systemd/proxypool.sysusers "$root/usr/lib/sysusers.d/proxypool.conf"
conffiles=(/etc/proxypool/proxypool.toml /etc/proxypool/gateway.toml)
for conffile in "${conffiles[@]}"; do
  install -D -m 0644 "deploy/debian/config/$(basename "$conffile")" "$root$conffile"
done
# Each service's group is given its directory by the postinst, once the accounts exist.
install -d -m 0750 "$root/etc/proxypool/secrets" "$root/etc/proxypool/gateway-secrets"

doc=$root/usr/share/doc/proxypool
install -D -m 0644 deploy/debian/copyright "$doc/copyright"
gzip -9n <README.md >"$doc/README.md.gz"
gzip -9n <docs/vendors.md >"$doc/vendors.md.gz"
install -D -m 0644 examples/proxypool.toml "$doc/examples/proxypool.toml"
install -D -m 0644 examples/gateway.toml "$doc/examples/gateway.toml"
# The version's number is its own (native) package, so the changelog is changelog.gz.
{
  printf 'proxypool (%s) unstable; urgency=medium\n\n' "$version"
  printf '  * proxypool %s, built from its release binary.\n\n' "$version"
  printf ' -- %s  %s\n' "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.gz"
chmod 0644 "$doc"/*.gz
install -d -m 0755 "$root/usr/share/man/man1"
manual_page "$binary" "$version" | gzip -9n >"$root/usr/share/man/man1/proxypool.1.gz"
chmod 0644 "$root/usr/share/man/man1/proxypool.1.gz"
install -D -m 0644 deploy/debian/lintian-overrides "$root/usr/share/lintian/overrides/proxypool"

mkdir -m 0755 "$root/DEBIAN"
installed_size=$(du -sk --apparent-size --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
  -e "s|@INSTALLED_SIZE@|$installed_size|" -e "s|@DEPENDS@|$depends|" \
  deploy/debian/control >"$root/DEBIAN/control"
if grep -q '@[A-Z_]*@' "$root/DEBIAN/control"; then
  die "deploy/debian/control has a placeholder this script does not fill"
fi
printf '%s\n' "${conffiles[@]}" >"$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do
  install -m 0755 "deploy/debian/$script" "$root/DEBIAN/$script"
done
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
  xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"

mkdir -p "$out"
deb=$out/proxypool_${version}_${arch}.deb
rm -f "$deb"
# --root-owner-group: every file root:root in the package, whoever builds it.
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
bytes=$(stat -c %s "$deb")
echo "built $deb ($(awk -v b="$bytes" 'BEGIN { printf "%.1f MB", b / 1000000 }'), $bytes bytes)"
echo "  Version: $version  Architecture: $arch  Depends: $depends"
