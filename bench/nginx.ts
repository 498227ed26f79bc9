import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../test/helpers/ports";
import { type StartedProcess, startProcess } from "../test/helpers/process";

/**
 * nginx as the baseline: a plain `proxy_pass` with upstream keep-alive, one worker (the gateway is one
 * process too), access log off. Runs in the foreground (`daemon off`) from a generated config under its
 * own prefix directory, and is stopped by PID.
 */
export interface Nginx {
  port: number;
  url: string;
  version: string;
  proc: StartedProcess;
}

export function nginxConfig(o: {
  dir: string;
  port: number;
  upstreamPort: number;
  keepalive: number;
}): string {
  return `worker_processes 1;
daemon off;
pid ${o.dir}/nginx.pid;
error_log ${o.dir}/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${o.dir}/client_body;
  proxy_temp_path ${o.dir}/proxy;
  fastcgi_temp_path ${o.dir}/fastcgi;
  uwsgi_temp_path ${o.dir}/uwsgi;
  scgi_temp_path ${o.dir}/scgi;
  keepalive_requests 1000000;
  # Bodies and answers stay in memory (no temp files): batch bodies are ~8 KB, larger than the default.
  client_body_buffer_size 1m;
  client_max_body_size 1m;
  proxy_buffer_size 64k;
  proxy_buffers 16 64k;
  upstream stub {
    server 127.0.0.1:${o.upstreamPort};
    keepalive ${o.keepalive};
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${o.port};
    location / {
      proxy_pass http://stub;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering on;
    }
  }
}
`;
}

export async function startNginx(o: {
  binary: string;
  dir: string;
  upstreamPort: number;
  keepalive: number;
}): Promise<Nginx> {
  mkdirSync(o.dir, { recursive: true });
  chmodSync(o.dir, 0o755); // nginx workers run as an unprivileged user when started as root
  const port = await freePort();
  const conf = join(o.dir, "nginx.conf");
  writeFileSync(
    conf,
    nginxConfig({ dir: o.dir, port, upstreamPort: o.upstreamPort, keepalive: o.keepalive }),
  );
  const v = spawnSync(o.binary, ["-v"], { encoding: "utf8" });
  const version = `${v.stderr ?? ""}${v.stdout ?? ""}`.trim().replace(/^nginx version: /, "") || "nginx";
  const url = `http://127.0.0.1:${port}`;
  const proc = await startProcess(o.binary, ["-p", o.dir, "-c", conf, "-e", join(o.dir, "error.log")], {
    ready: async () => {
      const res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}',
      });
      return res.ok;
    },
  });
  return { port, url, version, proc };
}
