"""The DCGM field registry: numeric ids, current (DCGM 4.6) and legacy names, units and meaning,
``dcgmi dmon`` column tags, and the NVML GPM metric that gives the same value (with its conversion).

Numeric ids are what Belvedere stores: they are stable across DCGM versions, while DCGM 4.6
renamed most fields (``DCGM_FI_PROF_SM_ACTIVE`` became ``DCGM_FI_PROF_SM_UTIL_RATIO``, both 1002)
and exporters still print the old names. ``lookup`` accepts either name, the id, or a dmon tag.
Facts: docs/reference dcgm-saturation.md §1–§3. Plain Python.

DCGM 4.6 (tag v4.6.0): every registry id, 4.6 name, deprecated name and unit is pinned against an extract of
``dcgmlib/dcgm_fields.h`` and ``dcgmlib/src/dcgm_fields.cpp`` (tests/telemetry/data/dcgm-4.6/, checked by
tests/telemetry/test_dcgm46_registry.py). Where DCGM's field metadata states a unit (``C``, ``W``, ``mJ``,
``KB/s``, ``MB/s``, ``#``) the registry's unit is that unit (``DCGM_METADATA_UNITS``); elsewhere DCGM's
metadata is blank and the unit is the one its header comments and NVML give.

dcgm-exporter 1.x names: the exporter's first releases (a ``dcgmi dmon`` + awk script, then 2.x's
``1.x-compatibility-metrics.csv``) printed ``dcgm_gpu_temp``-style names, the map ``OLD_DCGM_FI`` of
go-dcgm (NVIDIA/gpu-monitoring-tools ``bindings/go/dcgm/const.go``). ``EXPORTER_1X_NAMES`` is that map;
``lookup`` accepts those names too, so imports of such text land on the same field ids.

Completeness: every field of dcgm-exporter's shipped counter lists (``etc/dcp-metrics-included.csv``
and ``etc/default-counters.csv``, active and commented-out lines; copies and their commits in
tests/telemetry/data/dcgm-exporter/) resolves here, checked by tests/telemetry/test_dcgm_registry.py,
plus the GPU-health ids of ``dcgm_fields.h`` (group ``"health"``, judged by ``HEALTH``). Ids and old
names were checked against ``dcgmlib/dcgm_fields.h`` of NVIDIA/DCGM (commit 28bfbd4c), the 4.6 names
against DCGM 4.6's Python bindings ``dcgm_fields.py`` and since then against the v4.6.0 header (which names
1013-1015 ``DCGM_FI_PROF_{IMMA,HMMA,DFMA}_UTIL_RATIO``; Belvedere printed ``..._TENSOR_IMMA_UTIL_RATIO`` and so
on before, kept as ``aliases``). Not verified, so not listed: the NVLink
error totals 497–499 that DCGM 4.x added (``DCGM_FI_DEV_NVLINK_CRC_ERROR_TOTAL`` …), whose pre-4.6
names could not be confirmed in a DCGM header.

Kinds: ``gauge``, ``counter`` and ``label`` (text such as the driver version, which dcgm-exporter
attaches as a label to the other metrics: known, never stored as a sample).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

# Units as stored (DCGM's units; GPM values are converted on the way in).
RATIO, PERCENT, BYTES_PER_S, MHZ, WATTS, MILLIJOULES, CELSIUS, MIB, COUNT, BITMASK, NANOSECONDS, CODE, FLAG = (
    "ratio", "percent", "bytes/s", "MHz", "W", "mJ", "°C", "MiB", "count", "bitmask", "ns", "code", "flag")
KB_PER_S, MB_PER_S, TEXT = "KB/s", "MB/s", "text"
GAUGE, COUNTER, LABEL = "gauge", "counter", "label"

MIB_PER_S = 1024 * 1024  # GPM reports MiB/s; DCGM multiplies by 2^20 to give bytes/s
PERCENT_TO_RATIO = 0.01


@dataclass(frozen=True)
class Field:
    id: int
    name: str  # DCGM 4.6 name
    legacy: str | None  # the name up to DCGM 4.5 when 4.6 renamed it (exporters still print it)
    unit: str
    kind: str  # "gauge" (a level or an interval average), "counter" (monotonic: use differences) or "label" (text)
    group: str  # "profiling", "device", "health" (error counters and flags: apps/vetting judges them) or "static"
    meaning: str
    dmon: str | None = None  # column tag printed by dcgmi dmon
    gpm: int | None = None  # NVML GPM metric id with the same meaning
    gpm_scale: float = 1.0  # GPM value x gpm_scale = value in ``unit``
    aliases: tuple[str, ...] = ()  # other names accepted on lookup and import (not DCGM's; see the module doc)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,) + ((self.legacy,) if self.legacy else ()) + self.aliases

    @property
    def display_name(self) -> str:
        """The name people know from exporters and dashboards: the legacy one where there is one."""
        return self.legacy or self.name


def _p(id_, old, new, unit, dmon, gpm, meaning, kind="gauge", aliases=()):
    """A profiling field; ``new`` None means 4.6 kept the old name."""
    scale = PERCENT_TO_RATIO if unit == RATIO else MIB_PER_S if unit == BYTES_PER_S else 1.0
    return Field(id_, new or old, old if new else None, unit, kind, "profiling", meaning, dmon, gpm, scale, aliases)


def _d(id_, old, new, unit, dmon, meaning, kind="gauge", group="device"):
    return Field(id_, new or old, old if new else None, unit, kind, group, meaning, dmon)


def _h(id_, old, new, unit, dmon, meaning, kind="counter"):
    """A GPU-health field: an error counter, a failure flag or the last XID."""
    return _d(id_, old, new, unit, dmon, meaning, kind=kind, group="health")


def _s(id_, old, new, meaning, dmon=None):
    """A static text attribute (dcgm-exporter puts these on its other metrics as labels; ``dcgmi dmon`` prints
    them in a column under ``dmon``): stored as a version fact (apps/telemetry/versions.py), never a sample."""
    return Field(id_, new or old, old if new else None, TEXT, LABEL, "static", meaning, dmon)


_PROF = "DCGM_FI_PROF_"
_DEV = "DCGM_FI_DEV_"
_FI = "DCGM_FI_"

_FIELDS: list[Field] = [
    # --- profiling (DCP); on Hopper computed from NVML GPM, all at once, interval >= 100 ms -------
    _p(1001, _PROF + "GR_ENGINE_ACTIVE", _PROF + "GR_ENGINE_UTIL_RATIO", RATIO, "GRACT", 1,
       "Fraction of time the graphics/compute engine was busy (time-based, averaged over the interval)."),
    _p(1002, _PROF + "SM_ACTIVE", _PROF + "SM_UTIL_RATIO", RATIO, "SMACT", 2,
       "Fraction of cycles an SM had at least one warp resident, averaged over all SMs (stalled warps count)."),
    _p(1003, _PROF + "SM_OCCUPANCY", _PROF + "SM_OCCUPANCY_RATIO", RATIO, "SMOCC", 3,
       "Resident warps / maximum warps per SM, averaged over cycles."),
    _p(1004, _PROF + "PIPE_TENSOR_ACTIVE", _PROF + "TENSOR_UTIL_RATIO", RATIO, "TENSO", 5,
       "Fraction of cycles any tensor pipe was active (Hopper: HMMA + IMMA + DMMA)."),
    _p(1005, _PROF + "DRAM_ACTIVE", _PROF + "DRAM_UTIL_RATIO", RATIO, "DRAMA", 10,
       "Fraction of cycles the HBM interface was sending or receiving; about 0.8 is the practical maximum."),
    _p(1006, _PROF + "PIPE_FP64_ACTIVE", _PROF + "FP64_UTIL_RATIO", RATIO, "FP64A", 11,
       "Fraction of cycles the FP64 (non-tensor) pipe was active."),
    _p(1007, _PROF + "PIPE_FP32_ACTIVE", _PROF + "FP32_UTIL_RATIO", RATIO, "FP32A", 12,
       "Fraction of cycles the FMA (FP32) pipe was active."),
    _p(1008, _PROF + "PIPE_FP16_ACTIVE", _PROF + "FP16_UTIL_RATIO", RATIO, "FP16A", 13,
       "Fraction of cycles the FP16 non-tensor pipe was active."),
    _p(1009, _PROF + "PCIE_TX_BYTES", None, BYTES_PER_S, "PCITX", 20,
       "PCIe bytes sent by the GPU per second (header + payload), averaged over the interval."),
    _p(1010, _PROF + "PCIE_RX_BYTES", None, BYTES_PER_S, "PCIRX", 21,
       "PCIe bytes received by the GPU per second."),
    _p(1011, _PROF + "NVLINK_TX_BYTES", None, BYTES_PER_S, "NVLTX", 61,
       "NVLink bytes sent per second, all links."),
    _p(1012, _PROF + "NVLINK_RX_BYTES", None, BYTES_PER_S, "NVLRX", 60,
       "NVLink bytes received per second, all links."),
    _p(1013, _PROF + "PIPE_TENSOR_IMMA_ACTIVE", _PROF + "IMMA_UTIL_RATIO", RATIO, "TIMMA", 9,
       "Fraction of cycles the integer tensor pipe was active.", aliases=(_PROF + "TENSOR_IMMA_UTIL_RATIO",)),
    _p(1014, _PROF + "PIPE_TENSOR_HMMA_ACTIVE", _PROF + "HMMA_UTIL_RATIO", RATIO, "THMMA", 7,
       "Fraction of cycles the half/BF16/TF32/FP8 tensor pipe was active.", aliases=(_PROF + "TENSOR_HMMA_UTIL_RATIO",)),
    _p(1015, _PROF + "PIPE_TENSOR_DFMA_ACTIVE", _PROF + "DFMA_UTIL_RATIO", RATIO, "TDFMA", 6,
       "Fraction of cycles the FP64 tensor pipe was active.", aliases=(_PROF + "TENSOR_DFMA_UTIL_RATIO",)),
    _p(1016, _PROF + "PIPE_INT_ACTIVE", _PROF + "INT_UTIL_RATIO", RATIO, "INTAC", 4,
       "Fraction of cycles the integer pipe was active."),
    _p(1076, _PROF + "C2C_TX_ALL_BYTES", None, BYTES_PER_S, "C2CTXAB", 100,
       "NVLink-C2C (Grace to Hopper) bytes sent per second, header + payload (GH200, DCGM >= 4.1)."),
    _p(1077, _PROF + "C2C_TX_DATA_BYTES", None, BYTES_PER_S, "C2CTXDB", 102, "NVLink-C2C bytes sent per second, payload only."),
    _p(1078, _PROF + "C2C_RX_ALL_BYTES", None, BYTES_PER_S, "C2CRXAB", 101,
       "NVLink-C2C bytes received per second, header + payload."),
    _p(1079, _PROF + "C2C_RX_DATA_BYTES", None, BYTES_PER_S, "C2CRXDB", 103, "NVLink-C2C bytes received per second, payload only."),
    # --- device fields ---------------------------------------------------------------------------
    _d(203, _DEV + "GPU_UTIL", _DEV + "GPU_UTIL_RATIO", PERCENT, "GPUTL",
       "Percent of the sample period in which a kernel ran (0-100, despite the 4.6 name): utilisation, not saturation."),
    _d(204, _DEV + "MEM_COPY_UTIL", None, PERCENT, "MCUTL", "Percent of time device memory was read or written (coarse)."),
    _d(100, _DEV + "SM_CLOCK", None, MHZ, "SMCLK", "Current SM clock."),
    _d(101, _DEV + "MEM_CLOCK", None, MHZ, "MMCLK", "Current memory clock."),
    _d(110, _DEV + "APP_SM_CLOCK", None, MHZ, None, "Application SM clock."),
    _d(111, _DEV + "APP_MEM_CLOCK", None, MHZ, None, "Application memory clock."),
    _d(113, _DEV + "MAX_SM_CLOCK", None, MHZ, "SMMAX", "Maximum SM clock (the clock factor's denominator)."),
    _d(114, _DEV + "MAX_MEM_CLOCK", None, MHZ, None, "Maximum memory clock."),
    _d(112, _DEV + "CLOCK_THROTTLE_REASONS", _DEV + "CLOCKS_EVENT_REASONS", BITMASK, "DVCCTR",
       "Why clocks are held down: 0x1 idle, 0x2 clock setting, 0x4 SW power cap, 0x8 HW slowdown, 0x10 sync boost, "
       "0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake, 0x100 display clocks."),
    _d(1420, _DEV + "CLOCKS_EVENT_REASON_SW_POWER_CAP_NS", None, NANOSECONDS, None,
       "Time spent power-capped by software (cumulative).", kind="counter"),
    _d(1421, _DEV + "CLOCKS_EVENT_REASON_SYNC_BOOST_NS", None, NANOSECONDS, None, "Time in sync boost (cumulative).", kind="counter"),
    _d(1422, _DEV + "CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN_NS", None, NANOSECONDS, None,
       "Time slowed down by software thermal limits (cumulative).", kind="counter"),
    _d(1423, _DEV + "CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN_NS", None, NANOSECONDS, None,
       "Time slowed down by hardware thermal limits (cumulative).", kind="counter"),
    _d(1424, _DEV + "CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN_NS", None, NANOSECONDS, None,
       "Time slowed down by the hardware power brake (cumulative).", kind="counter"),
    _d(240, _DEV + "POWER_VIOLATION", None, NANOSECONDS, "PVIOL", "Time clocks were held down by power limits (cumulative).", kind="counter"),
    _d(241, _DEV + "THERMAL_VIOLATION", None, NANOSECONDS, None, "Time clocks were held down by thermal limits (cumulative).", kind="counter"),
    _d(242, _DEV + "SYNC_BOOST_VIOLATION", None, NANOSECONDS, None,
       "Time clocks were held down by the sync-boost group (cumulative).", kind="counter"),
    _d(243, _DEV + "BOARD_LIMIT_VIOLATION", None, NANOSECONDS, None,
       "Time clocks were held down by board limits (cumulative).", kind="counter"),
    _d(244, _DEV + "LOW_UTIL_VIOLATION", None, NANOSECONDS, None,
       "Time clocks were held down because of low utilisation (cumulative).", kind="counter"),
    _d(245, _DEV + "RELIABILITY_VIOLATION", None, NANOSECONDS, None,
       "Time clocks were held down by reliability limits (board voltage; cumulative).", kind="counter"),
    _d(150, _DEV + "GPU_TEMP", _DEV + "GPU_TEMP_CELSIUS", CELSIUS, "TMPTR", "GPU temperature."),
    _d(140, _DEV + "MEMORY_TEMP", _DEV + "MEMORY_TEMP_CELSIUS", CELSIUS, "MMTMP", "HBM temperature."),
    _d(153, _DEV + "GPU_TEMP_LIMIT", _DEV + "GPU_TEMP_MARGIN_CELSIUS", CELSIUS, None, "Margin to the nearest slowdown temperature."),
    _d(155, _DEV + "POWER_USAGE", _DEV + "BOARD_POWER_WATTS", WATTS, "POWER", "Board power, averaged by the driver."),
    _d(157, _DEV + "POWER_USAGE_INSTANT", _DEV + "BOARD_POWER_RAW_WATTS", WATTS, None, "Instantaneous board power."),
    _d(156, _DEV + "TOTAL_ENERGY_CONSUMPTION", None, MILLIJOULES, "TOTEC",
       "Energy since the driver loaded; a job's energy is last minus first.", kind="counter"),
    _d(160, _DEV + "POWER_MGMT_LIMIT", _DEV + "BOARD_POWER_LIMIT_REQUESTED_WATTS", WATTS, None, "Requested power cap."),
    _d(164, _DEV + "ENFORCED_POWER_LIMIT", _DEV + "BOARD_POWER_LIMIT_ENFORCED_WATTS", WATTS, None, "Enforced power cap."),
    _d(190, _DEV + "PSTATE", _DEV + "GPU_PSTATE", CODE, None, "Performance state (P0 fastest)."),
    _h(230, _DEV + "XID_ERRORS", _DEV + "XID_ERROR", CODE, "XIDER", "The last XID error code seen (a code, not a count).",
       kind=GAUGE),
    _h(310, _DEV + "ECC_SBE_VOL_TOTAL", None, COUNT, None, "Volatile single-bit (corrected) ECC errors since boot."),
    _h(311, _DEV + "ECC_DBE_VOL_TOTAL", None, COUNT, "EDVTL", "Volatile double-bit (uncorrectable) ECC errors since boot."),
    _h(312, _DEV + "ECC_SBE_AGG_TOTAL", None, COUNT, None,
       "Single-bit ECC errors over the GPU's life (aggregate, kept in the InfoROM)."),
    _h(313, _DEV + "ECC_DBE_AGG_TOTAL", None, COUNT, None,
       "Double-bit ECC errors over the GPU's life (aggregate, kept in the InfoROM)."),
    _h(390, _DEV + "RETIRED_SBE", _DEV + "PAGE_RETIRED_SBE_TOTAL", COUNT, None,
       "Frame-buffer pages retired after single-bit errors (pre-Ampere page retirement)."),
    _h(391, _DEV + "RETIRED_DBE", _DEV + "PAGE_RETIRED_DBE_TOTAL", COUNT, None,
       "Frame-buffer pages retired after double-bit errors (pre-Ampere page retirement)."),
    _h(392, _DEV + "RETIRED_PENDING", _DEV + "PAGE_RETIRED_PENDING", COUNT, None,
       "Pages waiting to be retired at the next GPU reset (non-zero: the GPU needs a reset; cleared by it).",
       kind=GAUGE),
    _h(393, _DEV + "UNCORRECTABLE_REMAPPED_ROWS", _DEV + "ROW_REMAP_UNCORRECTABLE_TOTAL", COUNT, None,
       "HBM rows remapped after uncorrectable errors."),
    _h(394, _DEV + "CORRECTABLE_REMAPPED_ROWS", _DEV + "ROW_REMAP_CORRECTABLE_TOTAL", COUNT, None,
       "HBM rows remapped after correctable errors."),
    _h(395, _DEV + "ROW_REMAP_FAILURE", _DEV + "ROW_REMAP_FAILED", FLAG, None,
       "Row remapping failed (1) or not (0): the GPU is out of spare rows.", kind=GAUGE),
    _h(396, _DEV + "ROW_REMAP_PENDING", None, FLAG, None,
       "A row remap waits for the next GPU reset (1) or not (0).", kind=GAUGE),
    _h(202, _DEV + "PCIE_REPLAY_COUNTER", _DEV + "PCIE_REPLAY_TOTAL", COUNT, None, "PCIe retries."),
    _h(409, _DEV + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", _DEV + "NVLINK_CRC_FLIT_ERROR_TOTAL", COUNT, None,
       "NVLink flow-control (flit) CRC errors, all links."),
    _h(419, _DEV + "NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", _DEV + "NVLINK_CRC_DATA_ERROR_TOTAL", COUNT, None,
       "NVLink data CRC errors, all links."),
    _h(429, _DEV + "NVLINK_REPLAY_ERROR_COUNT_TOTAL", _DEV + "NVLINK_REPLAY_ERROR_TOTAL", COUNT, None,
       "NVLink replays (retransmissions), all links."),
    _h(439, _DEV + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL", _DEV + "NVLINK_RECOVERY_ERROR_TOTAL", COUNT, None,
       "NVLink recoveries (a link retrained after errors), all links."),
    _d(526, _DEV + "VGPU_LICENSE_STATUS", None, CODE, None, "License status of the vGPU instance (vGPU hosts only)."),
    _d(206, _DEV + "ENC_UTIL", None, PERCENT, None, "Video encoder utilisation, percent of the sample period."),
    _d(207, _DEV + "DEC_UTIL", None, PERCENT, None, "Video decoder utilisation, percent of the sample period."),
    _d(200, _DEV + "PCIE_TX_THROUGHPUT", None, KB_PER_S, None,
       "Deprecated NVML PCIe transmit throughput in KB/s, measured over a short window by the driver: a rate, "
       "although dcgm-exporter's default-counters.csv declares it a counter. Prefer 1009."),
    _d(201, _DEV + "PCIE_RX_THROUGHPUT", None, KB_PER_S, None,
       "Deprecated NVML PCIe receive throughput in KB/s (a rate, see 200). Prefer 1010."),
    _d(250, _DEV + "FB_TOTAL", None, MIB, None, "Frame buffer memory, total."),
    _d(251, _DEV + "FB_FREE", None, MIB, None, "Frame buffer memory, free."),
    _d(252, _DEV + "FB_USED", None, MIB, "FBUSD", "Frame buffer memory, used."),
    _d(253, _DEV + "FB_RESERVED", None, MIB, None, "Frame buffer memory, reserved."),
    _d(254, _DEV + "FB_USED_PERCENT", _DEV + "FB_USED_RATIO", RATIO, None, "Frame buffer memory used, 0..1."),
    _d(449, _DEV + "NVLINK_BANDWIDTH_TOTAL", _DEV + "NVLINK_THROUGHPUT_TOTAL", MB_PER_S, "NBWLT",
       "NVLink throughput, all links, receive + transmit, in MB/s: DCGM reads NVML's data counters and publishes the "
       "average rate since its previous reading (a rate, although dcgm-exporter's CSVs declare it a counter). "
       "Prefer 1011/1012."),
    _d(285, _DEV + "C2C_LINK_COUNT", _DEV + "C2C_LINK_QUANTITY", COUNT, None, "Number of NVLink-C2C links."),
    _d(287, _DEV + "C2C_MAX_BANDWIDTH", None, "MB/s", None, "Maximum NVLink-C2C bandwidth (a runtime peak for normalising)."),
    _d(94, _DEV + "GPM_SUPPORT", None, FLAG, None, "Whether the GPU supports NVML GPM (Hopper and newer)."),
    # --- static text (dcgm-exporter: labels on the other metrics) --------------------------------
    _s(1, _FI + "DRIVER_VERSION", _FI + "SYSTEM_DRIVER_VERSION", "Driver version.", "DRVER"),
    _s(2, _FI + "NVML_VERSION", _FI + "SYSTEM_NVML_VERSION", "NVML version.", "NVVER"),
    _s(51, _DEV + "BRAND", _DEV + "GPU_BRAND", "Device brand.", "DVBRN"),
    _s(53, _DEV + "SERIAL", _DEV + "BOARD_SERIAL", "Board serial number.", "SRNUM"),
    _s(56, _DEV + "OEM_INFOROM_VER", _DEV + "INFOROM_OEM_VERSION", "OEM InfoROM version.", "OEMVR"),
    _s(80, _DEV + "ECC_INFOROM_VER", _DEV + "INFOROM_ECC_VERSION", "ECC InfoROM version.", "EIVER"),
    _s(81, _DEV + "POWER_INFOROM_VER", _DEV + "INFOROM_POWER_VERSION", "Power management InfoROM version.", "PIVER"),
    _s(82, _DEV + "INFOROM_IMAGE_VER", _DEV + "INFOROM_IMAGE_VERSION", "InfoROM image version.", "IIVER"),
    _s(85, _DEV + "VBIOS_VERSION", None, "VBIOS version.", "VBVER"),
]

# Per-link NVLink rates (Hopper+): link k transmit = 1040 + 2k, receive = 1041 + 2k; GPM 63 + 2k / 62 + 2k.
for _k in range(18):
    _FIELDS.append(_p(1040 + 2 * _k, f"{_PROF}NVLINK_L{_k}_TX_BYTES", None, BYTES_PER_S, None, 63 + 2 * _k,
                      f"NVLink link {_k} bytes sent per second."))
    _FIELDS.append(_p(1041 + 2 * _k, f"{_PROF}NVLINK_L{_k}_RX_BYTES", None, BYTES_PER_S, None, 62 + 2 * _k,
                      f"NVLink link {_k} bytes received per second."))

# Older NVML NVLink throughput per link (4.6: ..._NVLINK_THROUGHPUT_L<k>): links 0-5 are 440-445,
# links 6-11 are 475-480 (dcgm_fields.h). Rates in MB/s like 449; prefer the profiling rates 1040+.
for _k, _id in enumerate((440, 441, 442, 443, 444, 445, 475, 476, 477, 478, 479, 480)):
    _FIELDS.append(_d(_id, f"{_DEV}NVLINK_BANDWIDTH_L{_k}", f"{_DEV}NVLINK_THROUGHPUT_L{_k}", MB_PER_S, f"NBWL{_k}",
                      f"NVLink throughput of link {_k} in MB/s (a rate, see 449); prefer the profiling rates."))

# dcgmi dmon's column tags (DCGM's short names, dcgm_fields.cpp of v4.6.0) of the fields listed above without
# one, so that a dmon table with any of them imports.
_DMON_TAGS = {
    94: "GPMSPT", 110: "SACLK", 111: "MACLK", 114: "MMMAX", 153: "GTLIMIT", 157: "POWINST", 160: "PMLMT",
    164: "EPLMT", 190: "PSTAT", 200: "TXTPT", 201: "RXTPT", 202: "RPCTR", 206: "ECUTL", 207: "DCUTL",
    241: "TVIOL", 242: "SBVIO", 243: "BLVIO", 244: "LUVIO", 245: "RVIOL", 250: "FBTTL", 251: "FBFRE",
    253: "FBRSV", 254: "FBUSP", 285: "C2CLC", 287: "C2CMAXBW", 310: "ESVTL", 312: "ESATL", 313: "EDATL",
    390: "RPSBE", 391: "RPDBE", 392: "RPPEN", 393: "URMPS", 394: "CRMPS", 395: "RRF", 396: "RRP", 409: "NFELT",
    419: "NDELT", 429: "NRELT", 439: "NRCLT", 526: "VLCST", 1420: "CLKPCNS", 1421: "CLKBSTNS",
    1422: "CLKSWTHNS", 1423: "CLKHWTHNS", 1424: "CLKEPBSNS",
}
for _k in range(18):  # DcgmFieldsPopulateNvLinkProfileFieldRange: NVL<k>T / NVL<k>R
    _DMON_TAGS[1040 + 2 * _k], _DMON_TAGS[1041 + 2 * _k] = f"NVL{_k}T", f"NVL{_k}R"
_FIELDS = [replace(field, dmon=_DMON_TAGS[field.id]) if field.id in _DMON_TAGS else field for field in _FIELDS]

FIELDS: dict[int, Field] = {field.id: field for field in sorted(_FIELDS, key=lambda f: f.id)}
_BY_NAME: dict[str, Field] = {name: field for field in FIELDS.values() for name in field.names}
_BY_DMON: dict[str, Field] = {field.dmon: field for field in FIELDS.values() if field.dmon}
BY_GPM: dict[int, Field] = {field.gpm: field for field in FIELDS.values() if field.gpm is not None}

# DCGM's field metadata (``dcgm_field_output_format_t.unit`` set in dcgm_fields.cpp, blanks stripped) -> the
# registry's unit. ``#`` is dmon's "a number": a count for numbers; on a text field (the versions) it says nothing.
DCGM_METADATA_UNITS = {"C": CELSIUS, "W": WATTS, "mJ": MILLIJOULES, "KB/s": KB_PER_S, "MB/s": MB_PER_S,
                       "Mb/s": "Mb/s", "#": COUNT}

# dcgm-exporter 1.x metric names -> field id: go-dcgm's ``OLD_DCGM_FI`` (NVIDIA/gpu-monitoring-tools,
# bindings/go/dcgm/const.go, commit 958d3414), the names the 1.x awk exporter printed (``dcgm_`` + DCGM's field
# tag of its day) and dcgm-exporter 2.x prints with ``-f 1.x-compatibility-metrics.csv``. Copied, not derived.
EXPORTER_1X_NAMES: dict[str, int] = {
    "dcgm_sm_clock": 100, "dcgm_memory_clock": 101, "dcgm_memory_temp": 140, "dcgm_gpu_temp": 150,
    "dcgm_power_usage": 155, "dcgm_total_energy_consumption": 156, "dcgm_pcie_tx_throughput": 200,
    "dcgm_pcie_rx_throughput": 201, "dcgm_pcie_replay_counter": 202, "dcgm_gpu_utilization": 203,
    "dcgm_mem_copy_utilization": 204, "dcgm_enc_utilization": 206, "dcgm_dec_utilization": 207,
    "dcgm_xid_errors": 230, "dcgm_power_violation": 240, "dcgm_thermal_violation": 241,
    "dcgm_sync_boost_violation": 242, "dcgm_board_limit_violation": 243, "dcgm_low_util_violation": 244,
    "dcgm_reliability_violation": 245, "dcgm_fb_free": 251, "dcgm_fb_used": 252,
    "dcgm_ecc_sbe_volatile_total": 310, "dcgm_ecc_dbe_volatile_total": 311, "dcgm_ecc_sbe_aggregate_total": 312,
    "dcgm_ecc_dbe_aggregate_total": 313, "dcgm_retired_pages_sbe": 390, "dcgm_retired_pages_dbe": 391,
    "dcgm_retired_pages_pending": 392, "dcgm_nvlink_flit_crc_error_count_total": 409,
    "dcgm_nvlink_data_crc_error_count_total": 419, "dcgm_nvlink_replay_error_count_total": 429,
    "dcgm_nvlink_recovery_error_count_total": 439, "dcgm_nvlink_bandwidth_total": 449,
    "dcgm_fi_prof_gr_engine_active": 1001, "dcgm_fi_prof_sm_active": 1002, "dcgm_fi_prof_sm_occupancy": 1003,
    "dcgm_fi_prof_pipe_tensor_active": 1004, "dcgm_fi_prof_dram_active": 1005, "dcgm_fi_prof_pcie_tx_bytes": 1009,
    "dcgm_fi_prof_pcie_rx_bytes": 1010,
}
_BY_1X: dict[str, Field] = {name: FIELDS[field_id] for name, field_id in EXPORTER_1X_NAMES.items()}


def by_exporter_1x_name(name: str) -> Field | None:
    """The field a dcgm-exporter 1.x metric name (``dcgm_gpu_temp``) stands for; None if it is not one."""
    return _BY_1X.get(name.strip())

# What the collectors watch by default: the saturation model's inputs plus health (§6.6).
DEFAULT_PROFILING = (1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1076, 1078)
DEFAULT_DEVICE = (203, 100, 113, 112, 150, 140, 155, 156, 252, 230, 311)
DEFAULT_FIELDS = DEFAULT_PROFILING + DEFAULT_DEVICE


class UnknownField(KeyError):
    def __str__(self) -> str:
        return f"unknown DCGM field {self.args[0]!r}: give a numeric id (e.g. 1002) or a DCGM name (e.g. DCGM_FI_PROF_SM_ACTIVE)"


def lookup(key) -> Field:
    """The field for an id (1002, "1002"), a current or legacy DCGM name, a dmon tag ("SMACT") or a
    dcgm-exporter 1.x metric name ("dcgm_gpu_temp")."""
    if isinstance(key, bool):
        raise UnknownField(key)
    if isinstance(key, int):
        if key in FIELDS:
            return FIELDS[key]
        raise UnknownField(key)
    if isinstance(key, str):
        text = key.strip()
        if text.isascii() and text.isdigit() and int(text) in FIELDS:  # "²".isdigit() is True, int("²") fails
            return FIELDS[int(text)]
        field = (_BY_NAME.get(text) or _BY_NAME.get(text.upper()) or _BY_DMON.get(text.upper())
                 or _BY_1X.get(text) or _BY_1X.get(text.lower()))
        if field is not None:
            return field
    raise UnknownField(key)


def by_dmon_tag(tag: str) -> Field | None:
    return _BY_DMON.get(tag.strip().upper())


def field_ids(names) -> list[int]:
    """The ids of ``names`` (ids, DCGM names or dmon tags), duplicates dropped, in order; every name that
    is not a field is reported at once: ``ValueError`` with one message per unknown name."""
    ids, problems = [], []
    for name in names:
        try:
            ids.append(lookup(name).id)
        except UnknownField as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError(problems)
    return list(dict.fromkeys(ids))
