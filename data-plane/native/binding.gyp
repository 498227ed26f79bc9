{
  "targets": [
    {
      "target_name": "json_scan",
      "sources": ["json_scan.c"],
      "cflags": ["-O3", "-std=c11", "-Wall", "-Wextra"]
    }
  ]
}
