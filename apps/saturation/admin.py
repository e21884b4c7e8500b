from django.contrib import admin

from .models import GpuModelCeiling, JobSaturation


@admin.register(GpuModelCeiling)
class GpuModelCeilingAdmin(admin.ModelAdmin):
    list_display = ["name", "matches", "tensor", "dram", "link", "nvlink_peak", "pcie_peak", "c2c_peak", "updated"]
    search_fields = ["name", "matches"]
    readonly_fields = ["updated"]


@admin.register(JobSaturation)
class JobSaturationAdmin(admin.ModelAdmin):
    list_display = ["job", "status", "score", "limiter", "flags", "computed"]
    list_filter = ["status", "limiter"]
    search_fields = ["job__job_id", "job__user_name", "job__name"]
    readonly_fields = [field.name for field in JobSaturation._meta.fields]
