"""Key design tools: a simulator, an advisor and a Key Visualizer.

``widetable.design`` sits above the store: it replays workloads against real
(in-memory) widetable stores, reads a table's schema, keys and statistics, and
draws heatmaps. Nothing below it imports it.
"""

from .simulate import DesignResult, SimConfig, SimulationReport, simulate
from .workloads import Workload, get_workload, load_workload, workload_from_dict

__all__ = [
    "DesignResult",
    "SimConfig",
    "SimulationReport",
    "Workload",
    "get_workload",
    "load_workload",
    "simulate",
    "workload_from_dict",
]
