#!/usr/bin/env python3
"""A scripted model server on 127.0.0.1 for the model clients' tests (curl's
tests/data idea: the replies are data, the test checks what was asked).

    server.py SCENARIO.json LOG.json|-

Listens on a free port and prints it on stdout. Each request gets the next
reply of the scenario, {"replies": [REPLY, ...]}, where a REPLY is

    {"status": 200, "headers": {"Retry-After": "1"}, "body": <JSON value>}
    {"status": 200, "text": "raw body"}        a body that is not JSON
    {"delay": 2.0, ...}                        wait before replying
    {"drop": true}                             close without a reply
    {"cut": true, ...}                         send half the body, then close
    {"pad": N, ...}                            N spaces after the body
    {"say": TEXT or OBJECT, "usage": [IN, CACHED, OUT], "finish": F,
     "format": "openai"|"anthropic"}           a model's reply: the body of a
                                               chat completion (or Anthropic
                                               message) whose text is TEXT, or
                                               OBJECT as JSON (an agent's answer)

With {"by_turn": true, "replies": [...]} every conversation follows the
script on its own: a request gets the reply whose index is the number of
assistant messages it carries (many attempts at once against one server).

"@KEY@" in a body becomes the key (a server that echoes it). Past the last
reply every request gets a 500. LOG "-" keeps no log (the log is rewritten
whole on every request: quadratic over a long run). Otherwise, after each
request LOG.json holds
{"requests": [{"t", "method", "path", "headers", "key_header", "key_ok",
"key_in_body", "body"}, ...]}: headers with the key's value replaced by
"<key>", whether the key's header (Authorization: Bearer or x-api-key)
carried the expected key ($MKB_TEST_KEY), and the body (parsed when JSON).
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEY = os.environ.get("MKB_TEST_KEY", "")
LOCK = threading.Lock()
STATE = {"next": 0, "requests": []}


def save(path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"requests": STATE["requests"]}, f, indent=1)
    os.replace(tmp, path)


def redact(text):
    return text.replace(KEY, "<key>") if KEY else text


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def record(self, raw):
        text = raw.decode("utf-8", "replace")
        try:
            body = json.loads(text)
        except ValueError:
            body = redact(text)
        key_header, key_ok = None, False
        auth, xkey = self.headers.get("Authorization"), self.headers.get("x-api-key")
        if auth is not None:
            key_header, key_ok = "authorization", bool(KEY) and auth == "Bearer " + KEY
        elif xkey is not None:
            key_header, key_ok = "x-api-key", bool(KEY) and xkey == KEY
        return {
            "t": time.monotonic(),
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): redact(v) for k, v in self.headers.items()},
            "key_header": key_header,
            "key_ok": key_ok,
            "key_in_body": bool(KEY) and KEY in text,
            "body": body,
        }

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        replies = self.server.replies
        if self.server.by_turn:
            n = assistant_turns(raw)
        with LOCK:
            if self.server.log_path != "-":
                STATE["requests"].append(self.record(raw))
                save(self.server.log_path)
            if not self.server.by_turn:
                n = STATE["next"]
                STATE["next"] += 1
        reply = replies[n] if n < len(replies) else {
            "status": 500, "body": {"error": {"message": "the scenario has no more replies"}}}
        time.sleep(reply.get("delay", 0))
        if reply.get("drop"):
            self.close_connection = True
            return
        if "say" in reply:
            data = json.dumps(model_body(reply))
        elif "text" in reply:
            data = reply["text"]
        else:
            data = json.dumps(reply.get("body", {}))
        data = (data.replace("@KEY@", KEY) + " " * reply.get("pad", 0)).encode()
        try:
            self.send_response(reply.get("status", 200))
            self.send_header("Content-Type", reply.get("content_type", "application/json"))
            for k, v in reply.get("headers", {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2] if reply.get("cut") else data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout): what a real server sees too
        self.close_connection = True


def assistant_turns(raw):
    """How many assistant messages the request carries (its conversation's turn)."""
    try:
        messages = json.loads(raw).get("messages", [])
    except (ValueError, AttributeError):
        return 0
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


class Server(ThreadingHTTPServer):
    request_queue_size = 1024  # many clients connecting at once (the scale benchmark)


def model_body(reply):
    say = reply["say"]
    text = say if isinstance(say, str) else json.dumps(say, indent=1)
    n_in, cached, n_out = reply.get("usage", [1000, 0, 100])
    if reply.get("format") == "anthropic":
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
                "content": [{"type": "text", "text": text}],
                "stop_reason": reply.get("finish", "end_turn"),
                "usage": {"input_tokens": n_in - cached, "cache_read_input_tokens": cached,
                          "cache_creation_input_tokens": 0, "output_tokens": n_out}}
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": reply.get("finish", "stop")}],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out,
                      "prompt_tokens_details": {"cached_tokens": cached}}}


def main():
    scenario, log_path = sys.argv[1], sys.argv[2]
    with open(scenario) as f:
        data = json.load(f)
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.replies, server.log_path = data["replies"], log_path
    server.by_turn = bool(data.get("by_turn"))
    if log_path != "-":
        with LOCK:
            save(log_path)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
