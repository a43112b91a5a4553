#!/usr/bin/env python3
"""Writes tests/data/embeddings/*.ref.txt: llama.cpp's embeddings and rerank scores for tiny
embedding models and rerankers that `trellis model synth` writes deterministically (encoders, and
qwen3 files with a pooling_type as Qwen3-Embedding and Qwen3-Reranker have) (so the files need not be stored).

    scripts/gen_embedding_refs.py TRELLIS_BINARY LLAMA_SERVER_BINARY

Each model is synthesized into a temporary folder, served by llama-server (--embeddings, or
--rerank for a reranker) and asked, through its OpenAI-style endpoints, for the embeddings of
every line of texts.txt (normalized, as /v1/embeddings returns them), or for the score of every
line as a document for the query below.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "embeddings")
PORT = 18093
QUERY = "what is the capital of france?"

# name: synth arguments
MODELS = {
    "bert-tiny-mean-f32": ["--arch", "bert", "--pooling", "mean", "--type", "f32"],
    "bert-tiny-cls-f32": ["--arch", "bert", "--pooling", "cls", "--type", "f32"],
    "nomic-bert-tiny-mean-f32": ["--arch", "nomic-bert", "--pooling", "mean", "--type", "f32"],
    "bert-tiny-mean-q8_0": ["--arch", "bert", "--pooling", "mean", "--type", "q8_0"],
    "bert-tiny-rank-f32": ["--arch", "bert", "--pooling", "rank", "--type", "f32"],
    "qwen3-tiny-last-f32": ["--arch", "qwen3", "--pooling", "last", "--type", "f32"],
    "qwen3-tiny-rank-f32": ["--arch", "qwen3", "--pooling", "rank", "--type", "f32"],
}


def post(path, body):
    request = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def wait_ready(server):
    for _ in range(200):
        if server.poll() is not None:
            sys.exit("llama-server exited")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health") as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit("llama-server did not start")


def main():
    trellis, llama_server = sys.argv[1], sys.argv[2]
    with open(os.path.join(HERE, "texts.txt")) as f:
        texts = [line.rstrip("\n") for line in f if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        for name, synth_args in MODELS.items():
            path = os.path.join(tmp, name + ".gguf")
            subprocess.run([trellis, "model", "synth", "--preset", "tiny", "--seed", "7", "-o", path,
                            *synth_args], check=True, stderr=subprocess.DEVNULL)
            rank = "rank" in synth_args
            server = subprocess.Popen(
                [llama_server, "-m", path, "--port", str(PORT), "-t", "1", "-c", "4096",
                 "-b", "4096", "-ub", "4096", "-fa", "off", "--rerank" if rank else "--embeddings"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_ready(server)
                lines = [f"# llama.cpp llama-server, {'/v1/rerank' if rank else '/v1/embeddings'}, "
                         f"CPU, 1 thread, -fa off (f32 attention); model: trellis model synth --preset tiny --seed 7 "
                         + " ".join(synth_args)]
                if rank:
                    reply = post("/v1/rerank", {"query": QUERY, "documents": texts, "top_n": len(texts)})
                    scores = {r["index"]: r["relevance_score"] for r in reply["results"]}
                    lines.append(f"query: {QUERY}")
                    for i, text in enumerate(texts):
                        lines.append(f"document: {text}")
                        lines.append(f"score: {scores[i]:.9g}")
                else:
                    for text in texts:
                        reply = post("/v1/embeddings", {"input": text})
                        lines.append(f"text: {text}")
                        lines.append(f"prompt_tokens: {reply['usage']['prompt_tokens']}")
                        vector = reply["data"][0]["embedding"]
                        lines.append("embedding: " + " ".join(f"{x:.9g}" for x in vector))
            finally:
                server.terminate()
                server.wait()
            with open(os.path.join(HERE, name + ".ref.txt"), "w") as f:
                f.write("\n".join(lines) + "\n")
            print("wrote", name)


if __name__ == "__main__":
    main()
