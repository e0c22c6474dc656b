# The dependency layer of StreamGlobe's super-peer image: Debian's Python 3.11 and Java 17 (for
# the Spark executor), iproute2/iptables (link shaping and cut links), and the Python packages,
# installed offline from wheels built on the host (the host reaches PyPI; a container may not
# trust the proxy's certificate). Built on the base image imported from a debootstrap root.
ARG BASE
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv openjdk-17-jre-headless \
        iproute2 iptables procps ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /home/streamglobe --shell /usr/sbin/nologin streamglobe
COPY wheels /tmp/wheels
RUN python3 -m venv /opt/streamglobe \
 && /opt/streamglobe/bin/pip install --no-index --no-cache-dir --find-links /tmp/wheels /tmp/wheels/*.whl \
 && rm -rf /tmp/wheels
ENV PATH=/opt/streamglobe/bin:$PATH JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
