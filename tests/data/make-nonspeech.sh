#!/bin/sh
# make-nonspeech.sh - non-speech test inputs, made with sox rather than
# shipped: 5 s each of silence, white noise, a 440 Hz tone and a
# 100 Hz -> 4 kHz chirp (16 kHz mono 16-bit WAV), plus the tone as 44.1 kHz
# stereo FLAC (resampling + downmix path) and a C-major chord of plucked
# strings (music-like). Output goes into the folder given as argument
# (created if missing); nothing here is committed.
# Usage: tests/data/make-nonspeech.sh OUTDIR
set -eu
if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
out=$1
command -v sox >/dev/null 2>&1 || { echo "$0: sox not found" >&2; exit 1; }
mkdir -p "$out"
wav="-r 16000 -c 1 -b 16 -e signed-integer"
# -R: no dither, so silence stays exactly zero; -D: no auto dither either.
sox -R -D -n $wav "$out/silence.wav" trim 0 5
sox -R -D -n $wav "$out/white-noise.wav" synth 5 whitenoise vol 0.3
sox -R -D -n $wav "$out/tone-440.wav" synth 5 sine 440 vol 0.5
sox -R -D -n $wav "$out/chirp.wav" synth 5 sine 100-4000 vol 0.5
sox -R -D -n -r 44100 -c 2 -b 16 "$out/tone-440-44k-stereo.flac" synth 5 sine 440 vol 0.5
sox -R -D -n $wav "$out/chord.wav" synth 5 pluck C4 pluck E4 pluck G4 remix - vol 0.5
echo "wrote $(ls "$out" | wc -l) files to $out"
