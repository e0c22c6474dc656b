# The application layer: StreamGlobe's own packages on top of the dependency image, so that a
# source-only change rebuilds in seconds. The entrypoint shapes the links as root, then runs the
# super-peer as the unprivileged user "streamglobe".
ARG DEPS
FROM ${DEPS}
COPY src /opt/streamglobe-src
COPY entrypoint.sh spark.sh healthcheck.py /usr/local/lib/streamglobe/
ENV PYTHONPATH=/opt/streamglobe-src PYTHONUNBUFFERED=1
EXPOSE 50051
HEALTHCHECK --interval=3s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python3", "/usr/local/lib/streamglobe/healthcheck.py"]
ENTRYPOINT ["/bin/sh", "/usr/local/lib/streamglobe/entrypoint.sh"]
