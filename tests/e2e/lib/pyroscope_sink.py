"""pyroscope_sink.py - a stand-in for a Pyroscope ingest endpoint (tests).

Listens on 127.0.0.1 (port 0 = any; prints "PORT n"), accepts
POST /ingest?name=...&from=...&until=...&format=pprof with a multipart
form whose "profile" field holds the pprof bytes, as Pyroscope's ingest
API takes them, and saves each as DIR/push-N.pb.gz with the query string
in DIR/push-N.query.  Anything else gets 400.
"""
import email.parser
import email.policy
import http.server
import os
import sys
import urllib.parse

out = sys.argv[1]
n = 0


class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global n
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        ctype = self.headers.get("Content-Type", "")
        if u.path != "/ingest" or q.get("format") != ["pprof"] or "name" not in q or \
                not ctype.startswith("multipart/form-data"):
            self.send_response(400)
            self.end_headers()
            return
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
        prof = None
        for part in msg.iter_parts():
            if part.get_param("name", header="content-disposition") == "profile":
                prof = part.get_payload(decode=True)
        if not prof:
            self.send_response(400)
            self.end_headers()
            return
        with open(os.path.join(out, "push-%d.pb.gz" % n), "wb") as f:
            f.write(prof)
        with open(os.path.join(out, "push-%d.query" % n), "w") as f:
            f.write(u.query + "\n")
        n += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


s = http.server.HTTPServer(("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0), H)
print("PORT", s.server_address[1], flush=True)
s.serve_forever()
