"""Stream a 16 kHz mono WAV to inferd's live /v1/listen with whichever
deepgram-sdk is importable (PYTHONPATH picks it: test_live_sdk_versions
runs this once per pinned release), the way that release's own docs
stream: 4.x through listen.websocket.v("1") with LiveOptions and event
handlers, 5.x and later through listen.v1.connect() (6.0 to 7.1 send
booleans as "True"). Prints one JSON object per message received, then
{"type": "end", "sdk": VERSION, "close": CODE or null}.

  python dg_sdk_client.py PORT KEY WAV SPEED MODEL SDK_VERSION

(SDK_VERSION: the release expected importable; it exits 1 when another is.)
"""
import json
import sys
import threading
import time
import wave

FRAME_S = 0.1


def frames(path):
    with wave.open(path) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1
        pcm = w.readframes(w.getnframes())
    step = int(16000 * FRAME_S) * 2
    return [pcm[i:i + step] for i in range(0, len(pcm), step)]


def paced(chunks, speed, send):
    t0 = time.monotonic()
    for i, c in enumerate(chunks):
        send(c)
        delay = t0 + (i + 1) * FRAME_S / speed - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def emit(obj):
    print(json.dumps(obj), flush=True)


def results(is_final, from_finalize, speech_final, transcript, start, duration):
    return {"type": "Results", "is_final": bool(is_final), "from_finalize": bool(from_finalize),
            "speech_final": bool(speech_final), "transcript": transcript,
            "start": start, "duration": duration}


def run_v4(port, key, chunks, speed, model):
    from deepgram import (DeepgramClient, DeepgramClientOptions, LiveOptions,
                          LiveTranscriptionEvents)
    cfg = DeepgramClientOptions(url="http://127.0.0.1:%d" % port)
    conn = DeepgramClient(key, cfg).listen.websocket.v("1")
    finalized = threading.Event()

    def on_results(_, result, **kw):
        emit(results(result.is_final, getattr(result, "from_finalize", False),
                     result.speech_final, result.channel.alternatives[0].transcript,
                     result.start, result.duration))
        if getattr(result, "from_finalize", False):
            finalized.set()

    conn.on(LiveTranscriptionEvents.Transcript, on_results)
    conn.on(LiveTranscriptionEvents.Metadata,
            lambda _, metadata, **kw: emit({"type": "Metadata", "duration": metadata.duration}))
    conn.on(LiveTranscriptionEvents.SpeechStarted,
            lambda _, speech_started, **kw: emit({"type": "SpeechStarted"}))
    conn.on(LiveTranscriptionEvents.Error,
            lambda _, error, **kw: emit({"type": "Error", "error": str(error)}))
    opts = LiveOptions(model=model, encoding="linear16", sample_rate=16000, channels=1,
                       interim_results=True, punctuate=True, vad_events=True)
    if not conn.start(opts):
        emit({"type": "end", "sdk": "4", "close": None, "error": "start failed"})
        return
    paced(chunks, speed, conn.send)
    # 4.x's finish() sends CloseStream and closes 0.5 s later, before the
    # last finals can come: its documented pattern is Finalize first
    conn.finalize()
    finalized.wait(400)
    conn.finish()
    emit({"type": "end", "close": 1000 if finalized.is_set() else None})


def run_v5plus(port, key, chunks, speed, model):
    from deepgram import DeepgramClient
    from deepgram.environment import DeepgramClientEnvironment
    base = "127.0.0.1:%d" % port
    try:
        env = DeepgramClientEnvironment(base="http://" + base, production="ws://" + base,
                                        agent="ws://" + base, agent_rest="http://" + base)
    except TypeError:  # before 7.x: no agent_rest
        env = DeepgramClientEnvironment(base="http://" + base, production="ws://" + base,
                                        agent="ws://" + base)
    client = DeepgramClient(api_key=key, environment=env)
    # Python booleans, as an application written for these releases passes
    # them: 6.0 to 7.1 put "True" in the query
    with client.listen.v1.connect(model=model, encoding="linear16", sample_rate=16000,
                                  interim_results=True, punctuate=True,
                                  vad_events=True) as sock:
        def read():
            try:
                for m in sock:
                    kind = getattr(m, "type", type(m).__name__)
                    if kind == "Results":
                        emit(results(m.is_final, getattr(m, "from_finalize", False),
                                     m.speech_final, m.channel.alternatives[0].transcript,
                                     m.start, m.duration))
                    elif kind == "Metadata":
                        emit({"type": "Metadata", "duration": m.duration})
                    else:
                        emit({"type": str(kind)})
            except Exception as e:  # the socket's end, whatever its code
                emit({"type": "Error", "error": repr(e)})
        t = threading.Thread(target=read, daemon=True)
        t.start()
        paced(chunks, speed, sock.send_media)
        sock.send_close_stream()
        t.join(120)
        emit({"type": "end", "close": sock._websocket.close_code})


def main():
    port, key, wav, speed, model, want = sys.argv[1:7]
    from importlib.metadata import version as dist_version
    version = dist_version("deepgram-sdk")
    if version != want:
        sys.exit("deepgram-sdk %s is importable, not %s" % (version, want))
    emit({"type": "sdk", "version": version})
    run = run_v4 if version.startswith("4.") else run_v5plus
    run(int(port), key, frames(wav), float(speed), model)


if __name__ == "__main__":
    main()
