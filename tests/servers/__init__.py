"""Real servers for the tests, all on 127.0.0.1 with free ports, started and stopped by fixtures.

- :mod:`.net`: free ports, waiting for a port, a closed port and a socket that accepts and never answers.
- :mod:`.faults`: an HTTP server with range support and injectable faults.
- :mod:`.webhdfs`: a WebHDFS namenode + datanode pair storing files in a directory.
- :mod:`.moto_s3`: moto's S3 server in a subprocess.
- :mod:`.nginx`: nginx serving a directory from a generated config.
"""
