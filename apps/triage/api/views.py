"""Triage API views (staff only): the ranked list, and the change of an item's state."""
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import ErrorItem, InputError
from apps.core.api.params import parse_query
from apps.core.api.permissions import IsStaff

from ..selectors import triage_counts, triage_item_get, triage_items
from ..services import TriageError, triage_update
from .serializers import TriageCountsSerializer, TriageItemSerializer, TriageListParams, TriageListResponse, TriageUpdateSerializer

LIST_LIMIT = 500  # the inbox is a worklist: more than this is a problem of its own, and the counts say how many


class TriageListView(APIView):
    """The staff triage inbox, ranked: wasteful running jobs by GPU-hours lost first, then by severity and age."""

    permission_classes = [IsStaff]

    @extend_schema(operation_id="staff_triage_list", parameters=[TriageListParams], responses={200: TriageListResponse})
    def get(self, request):
        params = parse_query(request, TriageListParams)
        items = triage_items(kind=params.get("kind", ""), state=params.get("state", "open"))[:LIST_LIMIT]
        return Response({"counts": TriageCountsSerializer(triage_counts()).data, "results": TriageItemSerializer(items, many=True).data})


class TriageItemView(APIView):
    """One item; PATCH moves its state (acknowledge with an assignee, resolve, mute until, reopen)."""

    permission_classes = [IsStaff]

    @staticmethod
    def _item(pk):
        item = triage_item_get(pk)
        if item is None:
            raise Http404
        return item

    @extend_schema(operation_id="staff_triage_item_retrieve", responses={200: TriageItemSerializer})
    def get(self, request, pk):
        return Response(TriageItemSerializer(self._item(pk)).data)

    @extend_schema(operation_id="staff_triage_item_update", request=TriageUpdateSerializer, responses={200: TriageItemSerializer})
    def patch(self, request, pk):
        item = self._item(pk)
        serializer = TriageUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            item = triage_update(item, request.user, state=data["state"], assignee=data.get("assignee"),
                                 muted_until=data.get("muted_until"), note=data.get("note", ""))
        except TriageError as exc:
            raise InputError(str(exc), [ErrorItem(message=str(exc), field=exc.field)]) from exc
        return Response(TriageItemSerializer(triage_item_get(item.pk)).data)
