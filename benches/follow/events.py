#!/usr/bin/env python3
# The follower's CPU and memory over 10,000 events from a loopback server replaying them.
import json, os, subprocess, sys, threading, time, http.server, tempfile, shutil, signal
BIN=sys.argv[1]; N=10000
sid="ses_bench0000000000000000001"
frames=[]
for i in range(N):
    ev={"directory":"/p","project":"global","payload":{"id":f"evt_{i}","type":"message.part.updated","properties":{"sessionID":sid,"part":{"type":"tool","id":f"prt_{i}","messageID":f"msg_{i}","sessionID":sid,"tool":"bash","callID":f"c{i}","state":{"status":"completed","time":{"start":1,"end":2},"input":{"command":f"ls /x{i%7}"},"title":"","metadata":{"output":"x"*200},"output":"x"*200}},"time":3}}}
    frames.append("data: "+json.dumps(ev)+"\n\n")
body=("data: {\"payload\":{\"type\":\"server.connected\",\"properties\":{}}}\n\n"+"".join(frames)).encode()
done=threading.Event()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version="HTTP/1.0"
    def do_GET(self):
        if self.path.startswith("/global/event"):
            self.send_response(200); self.send_header("content-type","text/event-stream"); self.end_headers()
            self.wfile.write(body); self.wfile.flush(); done.wait(120); return
        if self.path.startswith("/experimental/session"):
            b=json.dumps([{"id":sid,"title":"bench","time":{"created":1,"updated":int(time.time()*1000)}}]).encode()
        else:
            b=b"[]"
        self.send_response(200); self.send_header("content-type","application/json"); self.send_header("content-length",str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self,*a): pass
srv=http.server.ThreadingHTTPServer(("127.0.0.1",0),H); threading.Thread(target=srv.serve_forever,daemon=True).start()
root=tempfile.mkdtemp(prefix="aw-10k-"); home=root+"/home"; os.makedirs(home+"/config/agentwatch")
open(home+"/config/agentwatch/config.toml","w").write(f'[watchdog]\nlocal_llm_enabled = false\n[opencode]\nservers = ["http://127.0.0.1:{srv.server_address[1]}"]\n[[channels]]\nname = "log"\ntype = "log"\n')
env={"HOME":home,"XDG_CONFIG_HOME":home+"/config","XDG_STATE_HOME":home+"/state","PATH":os.environ["PATH"]}
log=root+"/f.log"
t0=time.monotonic()
p=subprocess.Popen([BIN,"opencode","--follow"],env=env,stdout=subprocess.DEVNULL,stderr=open(log,"w"))
hz=os.sysconf("SC_CLK_TCK"); peak=0
def stat():
    f=open(f"/proc/{p.pid}/stat").read().rsplit(")",1)[1].split(); return (int(f[11])+int(f[12]))/hz
def hwm():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmHWM"): return int(l.split()[1])
# wait until the stream is read and two ticks after it ran
while open(log).read().count("tick=done")<3 and time.monotonic()-t0<60: time.sleep(0.2)
time.sleep(2.5)
cpu=stat(); mem=hwm()
p.send_signal(signal.SIGTERM); p.wait(timeout=30); done.set()
stop=[l for l in open(log) if "follow=stop" in l]
print(json.dumps({"events_sent":N,"stop_line":stop[-1].strip() if stop else None,"cpu_s":cpu,"peak_rss_kib":mem,"wall_s":round(time.monotonic()-t0,1),"ticks":open(log).read().count("tick=done")}))
shutil.rmtree(root, ignore_errors=True)
