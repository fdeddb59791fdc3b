#!/bin/sh
# make-languages.sh - the speech clips of tests/data/languages/ (language
# detection, forced language and translation on a multilingual Whisper
# model): one short sentence per language spoken by an espeak-ng voice,
# resampled to 16 kHz mono 16-bit WAV with sox (no dither, so a rerun with
# the same espeak-ng and sox versions gives the same bytes). The clips are
# committed (made with espeak-ng 1.51 and SoX 14.4.2 on Debian 12): the
# tests read them and tests/reference/language/faster_whisper.json was
# made from them, so this script only documents how they were made and
# remakes them on purpose. The voices are synthetic and the sentences our
# own (no licence attached); the reference transcripts show what Whisper
# base hears, which is not always what was said.
# Usage: tests/data/make-languages.sh [OUTDIR]   (default tests/data/languages)
set -eu
out=${1:-$(dirname "$0")/languages}
for c in espeak-ng sox; do
	command -v $c >/dev/null 2>&1 || { echo "$0: $c not found" >&2; exit 1; }
done
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
manifest="$out/manifest.tsv"
printf 'file\tlanguage\tvoice\tspeed_wpm\ttext\n' > "$manifest"
# say FILE LANGUAGE VOICE SPEED TEXT
say() {
	espeak-ng -v "$3" -s "$4" -w "$tmp/raw.wav" "$5"
	sox "$tmp/raw.wav" -R -D -r 16000 -c 1 -b 16 -e signed-integer "$out/$1"
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$manifest"
}
say en.wav en en-us 175 "The weather is nice today, so we are going for a walk in the park."
say de.wav de de 140 "Ich trinke jeden Morgen eine Tasse Kaffee."
say fr.wav fr fr-fr 150 "Bonjour, je m'appelle Marie et j'habite à Paris depuis dix ans."
say es.wav es es 175 "Hoy hace buen tiempo, así que vamos a pasear por el parque."
say it.wav it it 150 "Buongiorno, mi chiamo Marco e abito a Roma da dieci anni."
echo "wrote $(($(wc -l < "$manifest") - 1)) clips to $out"
