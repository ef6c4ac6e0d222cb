#!/usr/bin/env python3
# Latency from the flagging call's `completed` event to the delivered alert, real opencode.
import json, os, subprocess, sys, threading, time, urllib.request, http.server, socket, tempfile, shutil
BIN=sys.argv[1]; OC=os.environ["AGENTWATCH_OPENCODE_BIN"]
root=tempfile.mkdtemp(prefix="aw-lat-"); home=root+"/oc/home"; proj=root+"/oc/proj"
os.makedirs(home); os.makedirs(proj)
def free():
    s=socket.socket(); s.bind(("127.0.0.1",0)); p=s.getsockname()[1]; s.close(); return p
port=free()
env=dict(os.environ, HOME=home, XDG_DATA_HOME=home+"/.local/share", XDG_CONFIG_HOME=home+"/.config", XDG_CACHE_HOME=home+"/.cache", XDG_STATE_HOME=home+"/.local/state")
for v in ["OPENCODE_DISABLE_AUTOUPDATE","OPENCODE_DISABLE_MODELS_FETCH","OPENCODE_DISABLE_LSP_DOWNLOAD","OPENCODE_DISABLE_SHARE","OPENCODE_DISABLE_DEFAULT_PLUGINS","OPENCODE_DISABLE_CLAUDE_CODE"]: env[v]="1"
oc=subprocess.Popen([OC,"serve","--port",str(port),"--hostname","127.0.0.1"],cwd=proj,env=env,stdout=subprocess.PIPE,stderr=subprocess.DEVNULL,text=True)
for line in oc.stdout:
    if "listening on" in line: break
url=f"http://127.0.0.1:{port}"
def req(path, body=None):
    r=urllib.request.Request(url+path, data=None if body is None else json.dumps(body).encode(), headers={"content-type":"application/json"}, method="GET" if body is None else "POST")
    return json.load(urllib.request.urlopen(r, timeout=60))
sid=req("/session",{})["id"]
received=[]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n=int(self.headers.get("content-length",0)); b=json.loads(self.rfile.read(n)); received.append((time.monotonic(),b.get("state")))
        self.send_response(200); self.send_header("content-length","2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self,*a): pass
hook=http.server.ThreadingHTTPServer(("127.0.0.1",0),H); threading.Thread(target=hook.serve_forever,daemon=True).start()
completed=[]
def sse():
    r=urllib.request.urlopen(url+"/global/event", timeout=600)
    for raw in r:
        line=raw.decode(errors="replace")
        if line.startswith("data:") and '"message.part.updated"' in line and '"status":"completed"' in line and sid in line and '"type":"sync"' not in line:
            completed.append(time.monotonic())
threading.Thread(target=sse,daemon=True).start()
awhome=root+"/home"; os.makedirs(awhome+"/config/agentwatch")
open(awhome+"/config/agentwatch/config.toml","w").write(f'[watchdog]\nlocal_llm_enabled = false\n[opencode]\nservers = ["{url}"]\n[[channels]]\nname = "hook"\ntype = "webhook"\nurl = "http://127.0.0.1:{hook.server_address[1]}/e"\n')
aenv={"HOME":awhome,"XDG_CONFIG_HOME":awhome+"/config","XDG_STATE_HOME":awhome+"/state","PATH":os.environ["PATH"]}
log=open(root+"/follow.log","w")
f=subprocess.Popen([BIN,"opencode","--follow"],env=aenv,stdout=subprocess.DEVNULL,stderr=log)
time.sleep(4)
n=0
while not received and n<80:
    req(f"/session/{sid}/shell",{"agent":"build","command":"ls /nonexistent-agentwatch-dir"}); n+=1
    t=time.monotonic()
    while not received and time.monotonic()-t<3.2: time.sleep(0.01)
lat=received[0][0]-completed[-1] if received else None
# the completed event just before the alert
before=[c for c in completed if c<=received[0][0]] if received else []
print(json.dumps({"calls":n,"latency_ms": round((received[0][0]-before[-1])*1000,1) if before else None}))
f.terminate(); f.wait(); oc.terminate(); oc.wait(); shutil.rmtree(root, ignore_errors=True)
