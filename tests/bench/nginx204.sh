# Sourced by the broker benchmarks: nginx_204_conf DIR PORT WORKERS writes
# DIR/nginx.conf for nginx answering a static 204 to any request on
# 127.0.0.1:PORT. WORKERS=1 runs it as one process (no master), for
# callgrind; otherwise that many worker processes.
nginx_204_conf() {
    local dir=$1 port=$2 workers=$3
    mkdir -p "$dir"
    {
        [ "$workers" = 1 ] && printf 'master_process off;\ndaemon off;\n'
        cat <<CONF
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/body;
    server { listen 127.0.0.1:$port; location / { return 204; } }
}
CONF
    } > "$dir/nginx.conf"
}
