#!/bin/sh
# make-containers.sh - jfk.wav (11 s, 16 kHz mono) in the containers the
# audio decoder must read, made with the ffmpeg CLI (Debian's `ffmpeg`);
# the outputs are committed in tests/data/audio/containers/ (each under
# 100 KB). Whole-clip files transcribe to jfk's text; the 1-second ones
# exercise sample formats, rates and channel layouts.
#   jfk.webm           Opus in WebM written to a pipe, as a browser's
#                      MediaRecorder writes it: no duration, no cues
#   jfk.opus           Ogg Opus            jfk.ogg    Ogg Vorbis (22.05 kHz)
#   jfk.m4a            AAC in MP4 (44.1 kHz stereo)
#   jfk-id3.mp3        MP3 behind an ID3v2 tag (and an ID3v1 tail)
#   jfk-1s-ext24.wav   WAVE_FORMAT_EXTENSIBLE, 24-bit, 3 channels, 8 kHz
#   jfk-1s-f64.wav     64-bit float, 8 kHz
#   jfk-1s-mulaw.wav   G.711 mu-law, 8 kHz   jfk-1s-alaw.wav  A-law, 8 kHz
#   jfk-1s-51.mkv      FLAC in Matroska, 6 channels (5.1), 16 kHz
# Usage: tests/data/make-containers.sh   (from the repository root)
set -eu
src=tests/data/audio/jfk.wav
out=tests/data/audio/containers
command -v ffmpeg >/dev/null 2>&1 || { echo "$0: ffmpeg not found (apt-get install ffmpeg)" >&2; exit 1; }
mkdir -p "$out"
ff="ffmpeg -nostdin -hide_banner -loglevel error -y -bitexact -i $src -map_metadata -1"
$ff -c:a libopus -b:a 24k -f webm pipe:1 > "$out/jfk.webm"
$ff -c:a libopus -b:a 24k "$out/jfk.opus"
$ff -ar 22050 -c:a libvorbis -q:a 0 "$out/jfk.ogg"
$ff -ar 44100 -ac 2 -c:a aac -b:a 48k "$out/jfk.m4a"
$ff -c:a libmp3lame -b:a 32k -id3v2_version 3 -write_id3v1 1 -metadata title="jfk inaugural" \
	"$out/jfk-id3.mp3"
$ff -t 1 -ar 8000 -af "pan=3c|c0=c0|c1=0.5*c0|c2=0.25*c0" -c:a pcm_s24le "$out/jfk-1s-ext24.wav"
$ff -t 1 -ar 8000 -c:a pcm_f64le "$out/jfk-1s-f64.wav"
$ff -t 1 -ar 8000 -c:a pcm_mulaw "$out/jfk-1s-mulaw.wav"
$ff -t 1 -ar 8000 -c:a pcm_alaw "$out/jfk-1s-alaw.wav"
$ff -t 1 -ar 16000 -af "pan=5.1|FL=c0|FR=c0|FC=c0|LFE=0*c0|BL=c0|BR=c0" -c:a flac "$out/jfk-1s-51.mkv"
ls -l "$out"
