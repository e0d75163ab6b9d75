"""The Spark session's settings: the `[spark]` section, --spark-conf, and local mode's driver memory.

No Spark needed: these check what a session would be started with."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from phaselens.cli import app
from phaselens.models.config import load_config
from phaselens.models.spark import LOCAL_DRIVER_MEMORY_CAP_GB, parse_conf_args
from phaselens.pipeline.engines.spark import SPARK_CONF, session_settings
from phaselens.pipeline.incremental import config_hash


def test_local_mode_gets_a_driver_sized_to_the_machine_unless_set():
    s = session_settings("local[2]", 4, {})
    gb = int(s["spark.driver.memory"].removesuffix("g"))
    assert 1 <= gb <= LOCAL_DRIVER_MEMORY_CAP_GB
    assert session_settings("local[2]", 4, {"spark.driver.memory": "3g"})["spark.driver.memory"] == "3g"
    # on a cluster or over Spark Connect the driver's size is the cluster's business
    assert "spark.driver.memory" not in session_settings("yarn", 4, {})
    assert "spark.driver.memory" not in session_settings("sc://host:15002", 4, {})
    assert "spark.ui.enabled" not in session_settings("sc://host:15002", 4, {})


def test_the_sql_semantics_the_relations_need_cannot_be_overridden():
    s = session_settings("local[2]", 4, {"spark.sql.ansi.enabled": "false", "spark.sql.shuffle.partitions": "64"})
    assert s["spark.sql.ansi.enabled"] == SPARK_CONF["spark.sql.ansi.enabled"] == "true"
    assert s["spark.sql.shuffle.partitions"] == "64"  # a tuning knob is the user's


def test_spark_section_in_the_config(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[spark]\nmaster = "spark://head:7077"\nconf = { "spark.driver.memory" = "8g", '
                 '"spark.sql.adaptive.enabled" = true }\n')
    cfg = load_config(p)
    assert cfg.spark.master == "spark://head:7077"
    assert cfg.spark.conf == {"spark.driver.memory": "8g", "spark.sql.adaptive.enabled": "true"}
    # where the build runs does not change its answers: no full rebuild of the DuckDB store for it
    assert config_hash(cfg) == config_hash(load_config(None))


def test_a_spark_setting_that_is_not_spark_is_a_configuration_error(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[spark]\nconf = { "driver.memory" = "8g" }\n')
    with pytest.raises(Exception, match="start with 'spark.'"):
        load_config(p)


def test_spark_conf_arguments():
    assert parse_conf_args(["spark.driver.memory=8g", "spark.sql.shuffle.partitions = 8"]) == {
        "spark.driver.memory": "8g", "spark.sql.shuffle.partitions": "8"}
    for bad in ("spark.driver.memory", "driver.memory=8g", "spark.x="):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            parse_conf_args([bad])


def test_build_names_a_malformed_spark_conf(tmp_path):
    r = CliRunner().invoke(app, ["build", "--engine", "spark", "--lake", str(tmp_path), "--spark-conf", "memory=8g"])
    assert r.exit_code == 2
    assert "--spark-conf 'memory=8g'" in r.output and "spark.KEY=VALUE" in r.output
