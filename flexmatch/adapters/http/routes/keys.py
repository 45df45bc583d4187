"""API keys of the caller's own tenant, for keys with the admin permission."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from flexmatch.adapters.http.auth import Caller, require
from flexmatch.adapters.http.errors import not_found, reject_unknown_query
from flexmatch.adapters.http.schemas import KeyCreated, KeyCreateRequest
from flexmatch.adapters.http.state import ServiceState, get_state
from flexmatch.service import ApiKey, key_identity

router = APIRouter(prefix="/v1", tags=["keys"], dependencies=[Depends(reject_unknown_query)])

Admin = Annotated[Caller, Depends(require("admin"))]
State = Annotated[ServiceState, Depends(get_state)]


@router.get("/keys", response_model=list[ApiKey])
async def list_keys(principal: Admin, state: State) -> list[ApiKey]:
    """The tenant's keys, revoked ones included (never their secrets)."""
    return state.keys.list(principal.tenant)


@router.post("/keys", status_code=201, response_model=KeyCreated)
async def create_key(body: KeyCreateRequest, principal: Admin, state: State) -> KeyCreated:
    """A new key for the caller's tenant; its token is in this response only."""
    identity = key_identity(body.principal, body.groups, service=body.service)
    key, token = state.keys.create(principal.tenant, body.permissions, body.name, identity)
    return KeyCreated(key=key, token=token)


@router.delete("/keys/{key_id}", response_model=ApiKey)
async def revoke_key(key_id: str, principal: Admin, state: State) -> ApiKey:
    """Revoke a key of the caller's tenant; it stops working at once."""
    if not state.keys.revoke(key_id, tenant=principal.tenant):
        raise not_found("key", key_id)
    key = state.keys.get(key_id, tenant=principal.tenant)
    assert key is not None
    return key
