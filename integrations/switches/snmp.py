"""SNMP discovery adapter (pysnmp 7, asyncio API): implements integrations.ports.SnmpPoller.

Per switch: one GET for the system scalars (which also proves the agent answers and the credential works),
then GETBULK walks of the IF-MIB, ENTITY-MIB and LLDP-MIB columns we use, run concurrently. Many switches are
polled at once under an asyncio.Semaphore so a fabric of hundreds of leaves does not open hundreds of
sockets or flood the management network. Numeric OIDs and lookupMib=False: no MIB is loaded or compiled.

Only this module imports pysnmp. pysnmp's error indications become TransientError (timeouts: the host is
down, or - SNMPv2c agents drop wrong communities silently - the community is wrong) or PermanentError
(SNMPv3 unknown user, wrong digest or key: retrying cannot help).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from pyasn1.type import univ
from pysnmp.hlapi.v3arch.asyncio import (
    CommunityData,
    ContextData,
    ObjectIdentity,
    ObjectType,
    SnmpEngine,
    UdpTransportTarget,
    UsmUserData,
    bulk_walk_cmd,
    get_cmd,
    usmAesCfb128Protocol,
    usmAesCfb192Protocol,
    usmAesCfb256Protocol,
    usmDESPrivProtocol,
    usmHMAC128SHA224AuthProtocol,
    usmHMAC192SHA256AuthProtocol,
    usmHMAC256SHA384AuthProtocol,
    usmHMAC384SHA512AuthProtocol,
    usmHMACMD5AuthProtocol,
    usmHMACSHAAuthProtocol,
    usmNoAuthProtocol,
    usmNoPrivProtocol,
)
from pysnmp.proto import rfc1905

from integrations.exceptions import PermanentError, TransientError
from integrations.ports import SnmpCredential, SnmpTarget, SwitchSnapshot

from .snmp_decode import (
    JNX_BOX_DESCR,
    JNX_BOX_SERIAL,
    JUNIPER_ENTERPRISE,
    SYS_OBJECT_ID,
    SYSTEM_SCALARS,
    TABLE_COLUMNS,
    Column,
    RawSnmpData,
    Value,
    build_snapshot,
)

log = logging.getLogger(__name__)

_AUTH = {
    "none": usmNoAuthProtocol,
    "md5": usmHMACMD5AuthProtocol,
    "sha": usmHMACSHAAuthProtocol,
    "sha224": usmHMAC128SHA224AuthProtocol,
    "sha256": usmHMAC192SHA256AuthProtocol,
    "sha384": usmHMAC256SHA384AuthProtocol,
    "sha512": usmHMAC384SHA512AuthProtocol,
}
_PRIV = {
    "none": usmNoPrivProtocol,
    "des": usmDESPrivProtocol,
    "aes": usmAesCfb128Protocol,
    "aes128": usmAesCfb128Protocol,
    "aes192": usmAesCfb192Protocol,
    "aes256": usmAesCfb256Protocol,
}
# SNMPv3 report PDUs that mean the credential is wrong (not that the network is slow).
_PERMANENT_INDICATIONS = (
    "unknownusername",
    "wrongdigest",
    "decryptionerror",
    "unsupportedsecuritylevel",
    "unknownengineid",
    "authenticationfailure",
    "notintimewindow",
)


def _auth_data(cred: SnmpCredential) -> CommunityData | UsmUserData:
    if cred.version == "2c":
        if not cred.community:
            raise PermanentError("SNMPv2c credential has no community")
        return CommunityData(cred.community, mpModel=1)
    try:
        auth = _AUTH[(cred.auth_protocol or "none").lower()] if cred.auth_key else usmNoAuthProtocol
        priv = _PRIV[(cred.priv_protocol or "none").lower()] if cred.priv_key else usmNoPrivProtocol
    except KeyError as exc:
        raise PermanentError(f"unsupported SNMPv3 protocol {exc.args[0]!r}") from exc
    return UsmUserData(
        cred.user,
        authKey=cred.auth_key or None,
        privKey=cred.priv_key or None,
        authProtocol=auth,
        privProtocol=priv,
    )


def _python_value(value: Any) -> Value | None:
    """pyasn1 value -> bytes / int / dotted str; None for noSuchObject/noSuchInstance/endOfMibView."""
    if isinstance(value, rfc1905.NoSuchObject | rfc1905.NoSuchInstance | rfc1905.EndOfMibView | univ.Null):
        return None
    if isinstance(value, univ.OctetString):  # also IpAddress, Opaque
        return value.asOctets()
    if isinstance(value, univ.ObjectIdentifier):
        return str(value)
    if isinstance(value, univ.Integer):  # Integer32, Gauge32, Counter32/64, TimeTicks, Unsigned32
        return int(value)
    return str(value)


def _raise_for(indication: Any, target: SnmpTarget, what: str) -> None:
    text = str(indication)
    squashed = text.replace(" ", "").lower()
    if any(key in squashed for key in _PERMANENT_INDICATIONS):
        raise PermanentError(f"SNMP {what} rejected: {text} (check the SNMPv3 user and keys)", peer=target.label)
    if "timed out" in text.lower() or "timeout" in squashed:
        raise TransientError(
            f"no SNMP response within {target.timeout_s:g}s x {target.retries + 1} tries during {what} "
            "(host unreachable, agent down, or wrong community)",
            peer=target.label,
        )
    raise TransientError(f"SNMP {what} failed: {text}", peer=target.label)


class PysnmpPoller:
    """The real SnmpPoller. `concurrency` bounds how many switches are polled at once; `max_repetitions` is
    the GETBULK size (25 keeps a response under a 1500-byte MTU for ifTable-sized rows on most agents)."""

    def __init__(self, *, concurrency: int = 32, max_repetitions: int = 25, deadline_s: float = 120.0) -> None:
        self.concurrency = concurrency
        self.max_repetitions = max_repetitions
        self.deadline_s = deadline_s

    # -- Protocol (sync) ---------------------------------------------------------------------------------------

    def poll(self, target: SnmpTarget) -> SwitchSnapshot:
        result = self.poll_many([target])[0]
        if isinstance(result, Exception):
            raise result
        return result

    def poll_many(self, targets: Sequence[SnmpTarget]) -> list[SwitchSnapshot | Exception]:
        return asyncio.run(self.apoll_many(targets))

    # -- asyncio -----------------------------------------------------------------------------------------------

    async def apoll_many(self, targets: Sequence[SnmpTarget]) -> list[SwitchSnapshot | Exception]:
        # One engine for the whole batch: it multiplexes every request over one UDP socket per transport.
        engine = SnmpEngine()
        semaphore = asyncio.Semaphore(self.concurrency)

        async def bounded(target: SnmpTarget) -> SwitchSnapshot | Exception:
            async with semaphore:
                try:
                    return await asyncio.wait_for(self._poll_one(engine, target), self.deadline_s)
                except (TransientError, PermanentError) as exc:
                    return exc
                except TimeoutError:
                    return TransientError(f"poll exceeded its {self.deadline_s:g}s deadline", peer=target.label)
                except Exception as exc:  # a pysnmp/pyasn1 bug or an agent reply it cannot decode
                    log.exception("SNMP poll of %s failed", target.label)
                    return PermanentError(f"unexpected SNMP failure: {exc!r}", peer=target.label)

        try:
            return list(await asyncio.gather(*(bounded(t) for t in targets)))
        finally:
            engine.close_dispatcher()

    async def _poll_one(self, engine: SnmpEngine, target: SnmpTarget) -> SwitchSnapshot:
        auth = _auth_data(target.credential)
        context = ContextData(contextName=target.credential.context) if target.credential.context else ContextData()
        try:
            transport = await UdpTransportTarget.create(
                (target.host, target.port), timeout=target.timeout_s, retries=target.retries
            )
        except Exception as exc:  # DNS failure, bad address
            raise PermanentError(f"cannot resolve or use address: {exc}", peer=target.label) from exc

        raw = RawSnmpData()
        raw.scalars = await self._get(engine, auth, transport, context, target, SYSTEM_SCALARS)
        if str(raw.scalars.get(SYS_OBJECT_ID, "")).startswith(JUNIPER_ENTERPRISE):
            jnx = await self._get(engine, auth, transport, context, target, (JNX_BOX_DESCR, JNX_BOX_SERIAL))
            raw.scalars.update(jnx)
        columns = await asyncio.gather(
            *(self._walk(engine, auth, transport, context, target, oid) for oid in TABLE_COLUMNS)
        )
        raw.columns = dict(zip(TABLE_COLUMNS, columns, strict=True))
        return build_snapshot(raw)

    async def _get(self, engine, auth, transport, context, target: SnmpTarget, oids: Sequence[str]) -> dict[str, Value]:
        indication, status, _index, var_binds = await get_cmd(
            engine, auth, transport, context, *(ObjectType(ObjectIdentity(o)) for o in oids), lookupMib=False
        )
        if indication:
            _raise_for(indication, target, "GET " + oids[0])
        if status:
            # An SNMPv1-style error on one OID fails the whole PDU; ask one by one so one missing OID (Cumulus
            # has no sysUpTime in its recording) costs a round trip, not the poll.
            if len(oids) > 1:
                values: dict[str, Value] = {}
                for oid in oids:
                    values.update(await self._get(engine, auth, transport, context, target, (oid,)))
                return values
            return {}
        values = {}
        for name, value in var_binds:
            py = _python_value(value)
            if py is not None:
                values[str(name)] = py
        return values

    async def _walk(self, engine, auth, transport, context, target: SnmpTarget, column_oid: str) -> Column:
        prefix = tuple(int(x) for x in column_oid.split("."))
        rows: Column = {}
        async for indication, status, _index, var_binds in bulk_walk_cmd(
            engine,
            auth,
            transport,
            context,
            0,
            self.max_repetitions,
            ObjectType(ObjectIdentity(column_oid)),
            lookupMib=False,
            lexicographicMode=False,
        ):
            if indication:
                # bulk_walk_cmd yields a timeout and then keeps retrying forever: stop here, report once.
                _raise_for(indication, target, f"walk {column_oid}")
            if status:
                break  # the agent has no such table (v1-style error): an empty column
            for name, value in var_binds:
                oid = tuple(name)
                if oid[: len(prefix)] != prefix:
                    continue
                py = _python_value(value)
                if py is not None:
                    rows[oid[len(prefix) :]] = py
        return rows
